/** The per-session build (no I/O: the same input gives the same result, the input is left as it was). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { MergeCall } from '../../../src/trajectory/merge.ts';
import { buildSession, type SessionConfig } from '../../../src/trajectory/session.ts';
import { addStats, emptyStats } from '../../../src/trajectory/stats.ts';

const EOT = 151645;
const config: SessionConfig = {
  eotIds: [EOT],
  splice: false,
  requireTokenExact: false,
  exclude: new Set(),
  maxTokens: null,
  maxMode: 'truncate',
  maskUnparsed: false,
};

function call(id: string, seq: number, prompt: number[], completion: number[]): MergeCall {
  return {
    id,
    seq,
    prompt,
    completion,
    logprobs: completion.map(() => -0.5),
    tokenExact: true,
    finishReason: 'stop',
    requestKind: null,
    traceKind: null,
  };
}

describe('buildSession', () => {
  const second = call('c2', 1, [1, 2, 3, 10, EOT, 4, 5], [11, EOT]);
  const first = call('c1', 0, [1, 2, 3], [10, EOT]);
  const end = { status: 'completed' } as Parameters<typeof buildSession>[1];

  it('sorts by seq without touching its input, and gives the same result twice', () => {
    const calls = [second, first];
    const a = buildSession({ calls, seenCalls: 2, textOnly: 0 }, end, config);
    const b = buildSession({ calls, seenCalls: 2, textOnly: 0 }, end, config);
    assert.deepEqual(calls, [second, first]);
    assert.deepEqual(a, b);
    assert.ok(a.built);
    assert.equal(a.traces.length, 1);
    assert.deepEqual(a.traces[0]!.calls, ['c1', 'c2']);
    assert.equal(a.status, 'completed');
    assert.equal(a.stats.calls_merged, 1);
    assert.deepEqual(a.stats.status, { completed: 1 });
  });

  it('reports a skipped session with its reason in its own stats', () => {
    const none = buildSession({ calls: [], seenCalls: 3, textOnly: 3 }, end, config);
    assert.deepEqual(none, {
      built: false,
      stats: { ...emptyStats(), sessions_skipped: { 'no token ids (text-only capture)': 1 } },
    });
    const dropped = buildSession({ calls: [first], seenCalls: 1, textOnly: 0 }, null, {
      ...config,
      maxTokens: 4,
      maxMode: 'drop',
    });
    assert.equal(dropped.built, false);
    assert.deepEqual(dropped.stats.sessions_skipped, { 'over --max-trace-tokens (drop)': 1 });
  });

  it('adds session reports into the run report in first-seen order', () => {
    const total = emptyStats();
    total.notes.x = 1;
    const one = emptyStats();
    one.notes.y = 2;
    one.notes.x = 1;
    one.kinds.root = 1;
    one.calls_used = 3;
    addStats(total, one);
    addStats(total, one);
    assert.deepEqual(Object.entries(total.notes), [
      ['x', 3],
      ['y', 4],
    ]);
    assert.equal(total.kinds.root, 2);
    assert.equal(total.calls_used, 6);
  });
});
