/**
 * Overlong traces (issue 30, part 3): DAPO's length penalty at its boundaries, calls that ended at their
 * max tokens captured through the real proxy from each wire API (the vLLM stand-in cuts at max_tokens
 * with finish_reason length), flagged per trace by polar build (length_stopped, headroom), traces cut by
 * --max-trace-tokens, the counts, and --overlong recorded for polar train or applied to verl rows.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { CallRecord } from '../../../src/capture/record.ts';
import { DEFAULTS } from '../../../src/options/defaults.ts';
import {
  dapoLengthReward,
  isLengthStop,
  LENGTH_FINISH_REASONS,
  maxTokensInForce,
  overlongPenalty,
} from '../../../src/trajectory/overlong.ts';
import { trajectoryRecordSchema } from '../../../src/trajectory/record.ts';
import { formatStats } from '../../../src/trajectory/stats.ts';
import { post, startProxy, type TestProxy } from '../../support/proxy-harness.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';
import { buildFrom, call, grading, ids, session, sessionEnd } from './builder.ts';

test("DAPO's soft overlong punishment (eq. 13) at its boundaries", () => {
  // L_max 100, L_cache 20: no penalty up to 80 tokens, linear to -1 at 100, -1 beyond
  const r = (y: number) => dapoLengthReward(y, 100, 20);
  assert.equal(r(0), 0);
  assert.equal(r(79), 0);
  assert.equal(r(80), 0, '|y| = L_max - L_cache: still 0');
  assert.equal(r(81), -1 / 20, 'first token in the buffer');
  assert.equal(r(90), -0.5);
  assert.equal(r(99), -19 / 20);
  assert.equal(r(100), -1, '|y| = L_max: (L_max - L_cache - L_max) / L_cache');
  assert.equal(r(101), -1, 'over L_max');
  assert.equal(r(10_000), -1);
  // a buffer as long as the limit: the penalty starts at the first token
  assert.equal(dapoLengthReward(0, 8, 8), 0);
  assert.equal(dapoLengthReward(4, 8, 8), -0.5);
  // from the headroom h = L_max - |y|; no known limit is no penalty
  assert.equal(overlongPenalty(null, 20), 0);
  assert.equal(overlongPenalty(20, 20), 0);
  assert.equal(overlongPenalty(0, 20), -1);
  assert.equal(overlongPenalty(-5, 20), -1);
});

test('a length stop in every API form; the max tokens in force', () => {
  assert.deepEqual([...LENGTH_FINISH_REASONS].sort(), [
    'MAX_TOKENS',
    'length',
    'max_output_tokens',
    'max_tokens',
  ]);
  for (const stop of ['stop', 'tool_calls', 'error', null]) assert.equal(isLengthStop(stop), false);
  assert.equal(maxTokensInForce({ canonical_request: { maxTokens: 64 } }), 64);
  assert.equal(
    maxTokensInForce({
      canonical_request: { maxTokens: 32000 },
      backend_info: { max_tokens_fit: { asked: 32000, sent: 900 } },
    }),
    900,
    'what polar sent after fitting the context',
  );
  assert.equal(maxTokensInForce({ canonical_request: { messages: [] } }), null);
  assert.equal(maxTokensInForce({ canonical_request: null }), null);
});

/** One request per API asking for `max` tokens, and what its reply says about the stop. */
const APIS: {
  api: CallRecord['api'];
  path: string;
  body: (max: number, stream: boolean) => unknown;
  headers?: Record<string, string>;
  stopOf: (text: string, stream: boolean) => string;
}[] = [
  {
    api: 'openai-chat',
    path: '/v1/chat/completions',
    body: (max, stream) => ({
      model: 'x',
      max_tokens: max,
      stream,
      messages: [{ role: 'user', content: 'Say hi' }],
    }),
    stopOf: (text, stream) =>
      stream
        ? /"finish_reason":"(\w+)"/.exec(text)![1]!
        : (JSON.parse(text) as { choices: [{ finish_reason: string }] }).choices[0].finish_reason,
  },
  {
    api: 'anthropic-messages',
    path: '/v1/messages',
    headers: { 'anthropic-version': '2023-06-01' },
    body: (max, stream) => ({
      model: 'claude',
      max_tokens: max,
      stream,
      messages: [{ role: 'user', content: 'Say hi' }],
    }),
    stopOf: (text, stream) =>
      stream
        ? /"stop_reason":"(\w+)"/.exec(text)![1]!
        : (JSON.parse(text) as { stop_reason: string }).stop_reason,
  },
  {
    api: 'openai-responses',
    path: '/v1/responses',
    body: (max, stream) => ({ model: 'x', max_output_tokens: max, stream, input: 'Say hi' }),
    stopOf: (text) => /"incomplete_details":\{"reason":"(\w+)"\}/.exec(text)![1]!,
  },
  {
    api: 'gemini',
    path: '/v1beta/models/Qwen/Qwen3-4B:generateContent',
    body: (max) => ({
      contents: [{ role: 'user', parts: [{ text: 'Say hi' }] }],
      generationConfig: { maxOutputTokens: max },
    }),
    stopOf: (text) => /"finishReason":"(\w+)"/.exec(text)![1]!,
  },
];

const WIRE_LENGTH: Record<string, string> = {
  'openai-chat': 'length',
  'anthropic-messages': 'max_tokens',
  'openai-responses': 'max_output_tokens',
  gemini: 'MAX_TOKENS',
};

describe('calls cut at max tokens, captured from each API', () => {
  let standin: Standin;
  let p: TestProxy;
  before(async () => {
    standin = await startStandin();
    p = await startProxy({ url: standin.url });
  });
  after(async () => {
    await p.close();
    await standin.close();
  });

  test('each reply says length in its API; the capture records finish_reason length and the max tokens', async () => {
    for (const a of APIS) {
      for (const stream of a.api === 'gemini' ? [false] : [false, true]) {
        const headers = {
          ...(a.api === 'gemini' ? { 'x-goog-api-key': p.key } : { authorization: `Bearer ${p.key}` }),
          ...a.headers,
        };
        const r = await post(p.url, a.path, a.body(3, stream), headers);
        const text = await r.text();
        assert.equal(r.status, 200, `${a.api}: ${text}`);
        assert.equal(a.stopOf(text, stream), WIRE_LENGTH[a.api], `${a.api} stream ${stream}`);
        const rec = (await p.records()).at(-1)!;
        assert.equal(rec.api, a.api);
        assert.equal(rec.finish_reason, 'length', `${a.api}: the canonical form`);
        assert.equal(rec.completion_token_ids!.length, 3, 'cut at max tokens, no end-of-turn');
        assert.equal(maxTokensInForce(rec), 3);
      }
    }
    // the same question with room to answer ends with stop
    await post(p.url, '/v1/chat/completions', APIS[0]!.body(64, false), { authorization: `Bearer ${p.key}` });
    const done = (await p.records()).at(-1)!;
    assert.equal(done.finish_reason, 'stop');
  });

  test('polar build flags them per trace, counts them, records --overlong; verl rows get it applied', async () => {
    const captured = await p.records();
    const cut = captured.filter((r) => r.finish_reason === 'length');
    const whole = captured.find((r) => r.finish_reason === 'stop')!;
    assert.equal(cut.length, 7);
    const records: unknown[] = [];
    cut.forEach((rec, i) => {
      const s = `s-cut-${i}`;
      records.push(
        session(s, { sample: i }),
        { ...rec, session: s, id: `${s}-c`, seq: 0 },
        sessionEnd(s, 'completed', 1),
        grading(s, 1, { sample: i }),
      );
    });
    records.push(
      session('s-whole', { sample: 9 }),
      { ...whole, session: 's-whole', id: 's-whole-c', seq: 0 },
      sessionEnd('s-whole', 'completed', 1),
      grading('s-whole', 0, { sample: 9 }),
    );
    const built = await buildFrom(records);
    assert.equal(built.out.length, 8);
    for (const line of built.out) trajectoryRecordSchema.parse(line);
    const bySession = new Map(
      built.out.map((t) => [
        t.session as string,
        t as { traces: Record<string, unknown>[]; [k: string]: unknown },
      ]),
    );
    const t0 = bySession.get('s-cut-0')!;
    const trace0 = t0.traces[0]!;
    assert.equal(trace0.length_stopped, 1);
    assert.equal(trace0.headroom, 0, 'ended at its limit');
    assert.equal(t0.status, 'truncated');
    assert.deepEqual(t0.overlong, { mode: DEFAULTS.overlong.value, buffer: DEFAULTS.overlongBuffer.value });
    assert.equal(t0.reward, 1, 'the polar record keeps the reward: polar train applies --overlong');
    const w = bySession.get('s-whole')!.traces[0]!;
    assert.equal(w.length_stopped, undefined);
    assert.equal(w.headroom, 64 - whole.completion_token_ids!.length, 'tokens left under max_tokens');
    const s = built.stats;
    assert.equal(s.calls_length, 7);
    assert.equal(s.traces_overlong, 7);
    assert.equal(s.trajectories_overlong, 7);
    assert.equal(s.overlong_masked, 7, 'mask is the default');
    assert.equal(s.overlong_penalised, 0);
    assert.match(
      formatStats(s),
      /overlong\s+7 calls at max tokens; 7 traces in 7 trajectories \(masked: 7, penalised: 0\)/,
    );

    // verl rows go to another trainer: the mode is applied in them
    const verl = await buildFrom(records, { format: 'verl' });
    const row = verl.out.find((r) => r.session === 's-cut-0')!;
    assert.ok(
      (row.loss_mask as number[]).every((m) => m === 0),
      'masked',
    );
    assert.equal(row.length_stopped, 1);
    assert.equal(row.reward, 1);
    const kept = verl.out.find((r) => r.session === 's-whole')!;
    assert.ok((kept.loss_mask as number[]).some((m) => m === 1));

    const pen = await buildFrom(records, { format: 'verl', overlong: 'penalty', overlongBuffer: 100 });
    assert.equal(pen.out.find((r) => r.session === 's-cut-0')!.reward, 0, '1 + (-1): at its limit');
    const room = 64 - whole.completion_token_ids!.length;
    assert.equal(
      pen.out.find((r) => r.session === 's-whole')!.reward,
      (room - 100) / 100,
      'in the buffer: 0 + (h - L_cache) / L_cache',
    );
    assert.ok((pen.out.find((r) => r.session === 's-cut-0')!.loss_mask as number[]).some((m) => m === 1));
    assert.equal(pen.stats.overlong_penalised, 8);
    assert.equal(pen.stats.overlong_masked, 0);

    const polarPenalty = await buildFrom(records, { overlong: 'penalty', overlongBuffer: 100 });
    const p0 = polarPenalty.out.find((r) => r.session === 's-cut-0')!;
    assert.deepEqual(p0.overlong, { mode: 'penalty', buffer: 100 });
    assert.equal(p0.reward, 1, 'raw reward: polar train adds the penalty');

    const keep = await buildFrom(records, { overlong: 'keep' });
    assert.equal(keep.stats.traces_overlong, 7, 'still flagged and counted');
    assert.equal(keep.stats.overlong_masked, 0);
  });
});

test('--max-trace-tokens: a cut trace is overlong, its headroom below 0; a foreign capture wire stop counts', async () => {
  const records = [
    session('s1'),
    call('s1', { prompt: ids(1, 10), completion: [...ids(100, 20), 151645] }),
    sessionEnd('s1', 'completed', 1),
    grading('s1', 1),
    session('s2', { sample: 1 }),
    call('s2', { prompt: ids(1, 10), completion: ids(200, 5), finish: 'max_tokens' }),
    sessionEnd('s2', 'completed', 1),
    grading('s2', 0, { sample: 1 }),
  ];
  const built = await buildFrom(records, { maxTokens: 25 });
  const [a, b] = built.out as Array<{ traces: Array<Record<string, unknown>>; status: string }>;
  assert.equal(a!.traces[0]!.truncated, true);
  assert.equal(a!.traces[0]!.headroom, 25 - 31, 'cut by 6 tokens');
  assert.equal(a!.status, 'truncated');
  assert.equal(b!.traces[0]!.length_stopped, 1, 'Anthropic stop_reason max_tokens');
  assert.equal(b!.status, 'truncated');
  assert.equal(built.stats.traces_overlong, 2);
  assert.equal(built.stats.calls_length, 1);
  assert.deepEqual(built.stats.truncations, { max_tokens: 1 });
});
