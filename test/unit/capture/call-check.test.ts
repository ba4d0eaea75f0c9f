/**
 * The hand-written call-record check (src/capture/call-check.ts) against zod (callRecordSchema, the
 * documented schema): over valid records and over a corpus of broken ones (every field at every depth
 * removed, nulled, or given a value of each wrong type; pairs of top-level fields broken at once), the
 * two agree on accept/reject and on the field named first, and validateCaptureRecord (fast check, zod
 * fallback) returns or throws exactly what the zod-only path does: the same record, with the same key
 * order, or the same file:line, field and message.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CALL_FIELDS, checkCallShape } from '../../../src/capture/call-check.ts';
import { callRecordSchema } from '../../../src/capture/record.ts';
import { validateCaptureRecord, validateCaptureRecordWithZod } from '../../../src/capture/validate.ts';
import { InputError } from '../../../src/errors.ts';
import { syntheticCalls } from '../../support/synthetic-capture.ts';

/** A call record as the proxy writes one, with every optional field present (as read from JSON). */
function fullCall(): Record<string, unknown> {
  return json({
    v: 1,
    type: 'call',
    id: 's1-c0',
    session: 's1',
    seq: 0,
    api: 'openai-responses',
    harness: 'codex',
    stream: true,
    started_at: '2026-01-01T00:00:00.000Z',
    ended_at: '2026-01-01T00:00:01.000Z',
    timings: { ttfb_ms: 120, backend_ms: 900.5, total_ms: 950, extra_timing: 'kept' },
    request: {
      method: 'POST',
      path: '/v1/responses',
      headers: { 'content-type': 'application/json', 'x-n': '1' },
      body: { model: 'm', input: [{ role: 'user', content: 'hi' }] },
      extra: [1],
    },
    response: { status: 200, body: { id: 'r' } },
    canonical_request: { messages: [] },
    canonical_response: { content: 'x', finishReason: 'stop' },
    backend_request: { url: 'http://127.0.0.1:8000/v1/completions', body: { prompt: [1] } },
    prompt_token_ids: [1, 2, 3],
    completion_token_ids: [4, 5],
    completion_logprobs: [-0.5, -1],
    finish_reason: 'stop',
    usage: { prompt_tokens: 3, completion_tokens: 2 },
    token_exact: true,
    warnings: ['w1'],
    // (a JSON "__proto__" key is an own key: z.record leaves it out)
    harness_meta: JSON.parse('{"request_kind":"turn","n":2,"nested":{"a":[1]},"__proto__":{"a":1}}'),
    backend_info: { token_inexact: { cause: 'x' } },
    error: null,
    tool_call_unparsed: true,
    policy_version: 3,
    weight_versions: {
      source: 'server',
      versions: ['3', '4'],
      spans: [
        { version: '3', start: 0, end: 1, extra: 'kept' },
        { version: '4', start: 1, end: 2 },
      ],
    },
    unknown_top: { kept: true },
  });
}

/** A copy as JSON reads it back (own `__proto__` keys stay own keys). */
function json<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** The same with the optional fields absent and the nullable ones null. */
function leanCall(): Record<string, unknown> {
  const c = fullCall();
  for (const k of [
    'canonical_response',
    'backend_info',
    'tool_call_unparsed',
    'policy_version',
    'weight_versions',
    'unknown_top',
  ])
    delete c[k];
  Object.assign(c, {
    v: 2,
    api: 'models',
    token_exact: false,
    canonical_request: null,
    backend_request: null,
    prompt_token_ids: null,
    completion_token_ids: null,
    completion_logprobs: null,
    finish_reason: null,
    usage: null,
    warnings: [],
    harness_meta: {},
    error: { kind: 'backend', message: 'boom', status: 502, detail: 'kept' },
    timings: { ttfb_ms: null, backend_ms: null, total_ms: 0 },
  });
  return c;
}

const WRONG: unknown[] = [
  undefined,
  null,
  0,
  -1,
  1.5,
  2 ** 60,
  Number.POSITIVE_INFINITY,
  Number.NaN,
  '',
  'x',
  true,
  [],
  ['x'],
  [1],
  {},
  { a: 1 },
];

type Path = (string | number)[];

/** Every path into a value (objects and arrays), the value itself excluded. */
function paths(value: unknown, prefix: Path = []): Path[] {
  if (typeof value !== 'object' || value === null) return [];
  const out: Path[] = [];
  const keys = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value);
  for (const k of keys) {
    const p = [...prefix, k];
    out.push(p, ...paths((value as Record<string | number, unknown>)[k], p));
  }
  return out;
}

/** A deep copy of `base` with the value at `path` replaced (`remove`: deleted). */
function mutate(base: unknown, path: Path, to: unknown, remove = false): unknown {
  const copy = json(base) as Record<string | number, unknown>;
  let parent = copy;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (remove) delete parent[last];
  else parent[last] = to;
  return copy;
}

type Outcome = { ok: string; record: unknown } | { error: string; field: string | undefined };

function outcome(validate: typeof validateCaptureRecord, value: unknown): Outcome {
  try {
    // JSON.stringify keeps key order: the records must match field for field, in the same order, and
    // (deepEqual, strict) hold the same keys, an absent one and one set to undefined told apart
    const record = validate('c.jsonl', 7, value);
    return { ok: JSON.stringify(record), record };
  } catch (error) {
    if (!(error instanceof InputError)) throw error;
    return { error: error.message, field: error.field };
  }
}

const counts = { accepted: 0, rejected: 0 };

function assertAgree(value: unknown, what: string): void {
  const zod = outcome(validateCaptureRecordWithZod, value);
  assert.deepEqual(outcome(validateCaptureRecord, value), zod, what);
  // (only a record whose type is "call" is given to the fast check; the rest are zod's alone)
  if ((value as { type?: unknown }).type !== 'call') return;
  const fast = checkCallShape(value);
  if (typeof fast === 'string') {
    counts.rejected++;
    assert.ok('error' in zod, `${what}: the fast check refused (${fast}), zod accepted`);
    assert.equal(fast, zod.field, `${what}: the field named`);
  } else {
    counts.accepted++;
    // the shape accepted: zod either accepts too or names a token array's element (checked after both)
    if ('error' in zod)
      assert.match(zod.field ?? '', /^(prompt_token_ids|completion_token_ids|completion_logprobs)/);
  }
}

describe('call-record check against zod', () => {
  it('knows the fields of callRecordSchema, in its order', () => {
    assert.deepEqual(Object.keys(CALL_FIELDS), Object.keys(callRecordSchema.shape));
  });

  it('accepts valid records as zod returns them', () => {
    const valid = [
      fullCall(),
      leanCall(),
      ...syntheticCalls({
        id: 's',
        steps: ['extend', 'compaction', 'subagent', 'retry', 'diverge', 'error', 'text-only'],
        seed: 3,
        newIds: 5,
        completionIds: 3,
        textChars: 9,
      }),
    ];
    for (const [i, value] of valid.entries()) {
      const zod = outcome(validateCaptureRecordWithZod, value);
      assert.ok('ok' in zod, `valid record ${i} accepted by zod`);
      assert.equal(typeof checkCallShape(value), 'object', `valid record ${i} accepted`);
      assertAgree(value, `valid record ${i}`);
    }
  });

  it('agrees on every field removed, nulled or of a wrong type', () => {
    for (const base of [fullCall(), leanCall()]) {
      for (const path of paths(base)) {
        assertAgree(mutate(base, path, undefined, true), `${path.join('.')} removed`);
        for (const to of WRONG) assertAgree(mutate(base, path, to), `${path.join('.')} = ${String(to)}`);
      }
    }
    assert.ok(counts.accepted > 100 && counts.rejected > 300, JSON.stringify(counts));
  });

  it('names the first broken field when two are broken', () => {
    const keys = Object.keys(fullCall());
    for (const a of keys)
      for (const b of keys) {
        if (a === b) continue;
        const twice = mutate(mutate(fullCall(), [a], 'wrong'), [b], { wrong: true });
        assertAgree(twice, `${a} and ${b} broken`);
      }
  });

  it('agrees on a token-exact call without ids and on a bad token array element', () => {
    assertAgree({ ...fullCall(), prompt_token_ids: null }, 'token_exact without prompt ids');
    assertAgree(
      { ...fullCall(), completion_token_ids: null, completion_logprobs: null },
      'no completion ids',
    );
    assertAgree({ ...fullCall(), prompt_token_ids: [1, -2] }, 'negative id');
    assertAgree({ ...fullCall(), completion_logprobs: [-1] }, 'logprobs length');
    assertAgree({ ...fullCall(), v: 3 }, 'unsupported version');
  });
});
