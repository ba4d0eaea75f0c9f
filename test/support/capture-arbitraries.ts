/**
 * fast-check arbitraries of whole capture files for the capture-format properties: two synthetic
 * sessions (test/support/synthetic-capture.ts: compaction, subagents, retries, divergences, failed and
 * text-only calls) with their records interleaved, and request bodies that may carry the keys a plain
 * object mishandles (`__proto__`, `constructor`, `toString`) at the top level, where v2 writes deltas.
 */
import fc from 'fast-check';
import type { CallRecord, CaptureRecord } from '../../src/capture/record.ts';
import { type Step, sessionEndRecord, sessionRecord, syntheticCalls } from './synthetic-capture.ts';

export const stepArb = fc.constantFrom<Step>(
  'extend',
  'extend',
  'extend',
  'compaction',
  'subagent',
  'retry',
  'diverge',
  'error',
  'text-only',
);

export const sessionArb = (id: string) =>
  fc
    .record({
      steps: fc.array(stepArb, { maxLength: 14 }),
      seed: fc.nat(),
      newIds: fc.integer({ min: 1, max: 12 }),
      completionIds: fc.integer({ min: 1, max: 8 }),
      textChars: fc.integer({ min: 1, max: 40 }),
      ended: fc.boolean(),
    })
    .map((s) => ({ ...s, id }));

/** Keys an assignment to a plain object mishandles (`__proto__` sets the prototype), and their values. */
export const HOSTILE_KEYS = ['__proto__', 'constructor', 'toString'] as const;
const HOSTILE_VALUES: unknown[] = [
  { polluted: 'a value long enough not to be written literally' },
  'a string long enough not to be written literally',
  [1, 2, 3, 'an array of a few items'],
  null,
  7,
];

/**
 * Own properties, as JSON.parse makes them (an assignment of `__proto__` would not), first in key order;
 * a value per key from the pool (index -1: the key is absent), so consecutive calls share some of them.
 */
function withHostileKeys(body: unknown, picks: readonly number[]): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const out: Record<string, unknown> = {};
  HOSTILE_KEYS.forEach((key, i) => {
    const pick = picks[i] ?? -1;
    if (pick < 0) return;
    const value = HOSTILE_VALUES[pick % HOSTILE_VALUES.length];
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  });
  for (const [k, v] of Object.entries(body)) out[k] = v;
  return out;
}

const hostileArb = fc.array(fc.array(fc.integer({ min: -1, max: 4 }), { minLength: 3, maxLength: 3 }), {
  maxLength: 16,
});

function addHostileKeys(calls: CallRecord[], picks: readonly number[][]): CallRecord[] {
  if (picks.length === 0) return calls;
  return calls.map((c, i) => {
    const p = picks[i % picks.length]!;
    return {
      ...c,
      request: { ...c.request, body: withHostileKeys(c.request.body, p) },
      canonical_request: withHostileKeys(c.canonical_request, p),
    };
  });
}

/** Two sessions' records interleaved as `order` says (true: the next record of session a). */
export const captureArb = fc
  .record({
    a: sessionArb('sess_a'),
    b: sessionArb('sess_b'),
    order: fc.array(fc.boolean(), { maxLength: 60 }),
    hostile: hostileArb,
  })
  .map(({ a, b, order, hostile }) => {
    const lists = [a, b].map((s) => [
      sessionRecord(s.id) as CaptureRecord,
      ...addHostileKeys(syntheticCalls(s), hostile),
      ...(s.ended ? [sessionEndRecord(s.id, s.steps.length + 1)] : []),
    ]);
    const records: CaptureRecord[] = [];
    let i = 0;
    while (lists[0]!.length > 0 || lists[1]!.length > 0) {
      const pick =
        lists[0]!.length === 0
          ? 1
          : lists[1]!.length === 0
            ? 0
            : order[i++ % Math.max(1, order.length)]
              ? 0
              : 1;
      records.push(lists[pick]!.shift()!);
    }
    return records;
  });
