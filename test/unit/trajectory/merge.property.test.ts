/**
 * Property tests (fast-check) of prefix merging over generated sessions: several interleaved
 * conversations, tool glue, EOT present or not, random history rewrites (divergences), compaction
 * calls, missing logprobs. A small token alphabet makes accidental prefix collisions common.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { type MergeCall, type MergedTrace, mergeCalls } from '../../../src/trajectory/merge.ts';
import { buildFrom, call, EOT, session, sessionEnd } from './builder.ts';

const tok = fc.integer({ min: 0, max: 12 });

interface TurnSpec {
  completion: number[];
  eot: boolean;
  glue: number[];
  /** rewrite one earlier token of the history before this turn (a template that re-renders history) */
  rewrite: number | null;
  noLogprobs: boolean;
  compaction: boolean;
}

const turnArb: fc.Arbitrary<TurnSpec> = fc.record({
  completion: fc.array(tok, { maxLength: 6 }),
  eot: fc.boolean(),
  glue: fc.array(tok, { maxLength: 4 }),
  rewrite: fc.option(fc.nat({ max: 1000 }), { freq: 6 }),
  noLogprobs: fc.integer({ min: 0, max: 9 }).map((x) => x === 0),
  compaction: fc.integer({ min: 0, max: 7 }).map((x) => x === 0),
});

const conversationArb = fc.record({
  first: fc.array(tok, { minLength: 1, maxLength: 8 }),
  turns: fc.array(turnArb, { minLength: 1, maxLength: 6 }),
});

/** Calls of a session: conversations played turn by turn, interleaved in the order `schedule` picks. */
const sessionArb = fc
  .record({
    conversations: fc.array(conversationArb, { minLength: 1, maxLength: 3 }),
    schedule: fc.array(fc.nat({ max: 2 }), { maxLength: 40 }),
  })
  .map(({ conversations, schedule }) => {
    const calls: MergeCall[] = [];
    const history = conversations.map((c) => c.first.slice());
    const next = conversations.map(() => 0);
    let seq = 0;
    const play = (ci: number): void => {
      const conv = conversations[ci]!;
      const turn = conv.turns[next[ci]!]!;
      next[ci]!++;
      const h = history[ci]!;
      if (turn.rewrite !== null && h.length > 0) h[turn.rewrite % h.length] = 13 + (turn.rewrite % 3);
      const completion = turn.eot ? [...turn.completion, EOT] : turn.completion;
      calls.push({
        id: `c${seq}`,
        seq: seq++,
        prompt: h.slice(),
        completion,
        logprobs: turn.noLogprobs ? null : completion.map((_, i) => -(seq + i) / 100),
        tokenExact: true,
        finishReason: turn.eot ? 'stop' : 'length',
        requestKind: turn.compaction ? 'compaction' : null,
        traceKind: null,
      });
      if (!turn.compaction) h.push(...completion, ...turn.glue);
    };
    for (const pick of schedule) {
      const ci = pick % conversations.length;
      if (next[ci]! < conversations[ci]!.turns.length) play(ci);
    }
    conversations.forEach((c, ci) => {
      while (next[ci]! < c.turns.length) play(ci);
    });
    return calls;
  });

function sequence(t: MergedTrace | { prompt_ids: number[]; response_ids: number[] }): number[] {
  return [...t.prompt_ids, ...t.response_ids];
}

function checkInvariants(calls: readonly MergeCall[], traces: readonly MergedTrace[], exact: boolean): void {
  const byId = new Map(calls.map((c) => [c.id, c]));
  const seen = new Set<string>();
  for (const t of traces) {
    assert.equal(t.loss_mask.length, t.response_ids.length);
    if (t.response_logprobs !== null) assert.equal(t.response_logprobs.length, t.response_ids.length);
    assert.ok(t.calls.length > 0);
    const members = t.calls.map((id) => byId.get(id)!);
    for (const id of t.calls) {
      assert.ok(!seen.has(id), `call ${id} in two traces`);
      seen.add(id);
    }
    // mask-1 tokens are exactly the sampled ids, in order, with their logprobs; mask-0 logprobs are 0
    const sampled = members.flatMap((c) => c.completion);
    const masked = t.response_ids.filter((_, i) => t.loss_mask[i] === 1);
    assert.deepEqual(masked, sampled);
    const anyNull = members.some((c) => c.logprobs === null);
    assert.equal(t.response_logprobs === null, anyNull);
    if (t.response_logprobs !== null) {
      const lps = members.flatMap((c) => c.logprobs!);
      assert.deepEqual(
        t.response_logprobs.filter((_, i) => t.loss_mask[i] === 1),
        lps,
      );
      assert.ok(t.response_logprobs.every((x, i) => t.loss_mask[i] === 1 || x === 0));
    }
    assert.deepEqual(t.prompt_ids, members[0]!.prompt);
    if (exact) {
      // the whole trace is what the last merged call saw and sampled; every call's view is a prefix of it
      const last = members[members.length - 1]!;
      assert.deepEqual(sequence(t), [...last.prompt, ...last.completion]);
      const seq = sequence(t);
      let offset = t.prompt_ids.length;
      for (const c of members) {
        assert.deepEqual(seq.slice(0, c.prompt.length), [...c.prompt]);
        assert.ok(c.prompt.length >= offset, 'each call extends the previous call of its trace');
        assert.deepEqual(seq.slice(c.prompt.length, c.prompt.length + c.completion.length), [
          ...c.completion,
        ]);
        offset = c.prompt.length + c.completion.length;
      }
    }
  }
  assert.equal(seen.size, calls.length, 'every call lands in exactly one trace');
}

describe('prefix merging properties', () => {
  it('exact mode: each trace equals its last call prompt + completion; masks and logprobs line up', () => {
    fc.assert(
      fc.property(sessionArb, (calls) => {
        const { traces, stats } = mergeCalls(calls, { eotIds: [EOT], splice: false });
        checkInvariants(calls, traces, true);
        assert.equal(stats.calls, calls.length);
        assert.equal(stats.calls_merged, calls.length - traces.length);
        assert.equal(stats.chains, traces.length);
      }),
      { numRuns: 400 },
    );
  });

  it('splice mode: mask-1 tokens are still exactly the sampled ones', () => {
    fc.assert(
      fc.property(sessionArb, (calls) => {
        const { traces, stats } = mergeCalls(calls, { eotIds: [EOT], splice: true });
        checkInvariants(calls, traces, false);
        const exact = mergeCalls(calls, { eotIds: [EOT], splice: false });
        assert.ok(traces.length <= exact.traces.length);
        assert.equal(stats.calls_merged, calls.length - traces.length);
      }),
      { numRuns: 300 },
    );
  });

  it('splice mode: a call that extends a spliced chain in server tokens stays on it (found by fast-check)', () => {
    const c = (id: string, seq: number, prompt: number[], completion: number[], finishReason: string) => ({
      id,
      seq,
      prompt,
      completion,
      logprobs: null,
      tokenExact: true,
      finishReason,
      requestKind: null,
      traceKind: null,
    });
    const calls = [
      c('c0', 0, [13], [0], 'length'),
      c('c1', 1, [13], [EOT], 'stop'),
      c('c2', 2, [13, EOT], [0], 'length'),
      c('c3', 3, [13, EOT, 15], [], 'length'),
      c('c4', 4, [13, EOT, 15], [], 'length'),
      c('c5', 5, [13, 0], [], 'length'),
    ] as Parameters<typeof mergeCalls>[0];
    const spliced = mergeCalls(calls, { eotIds: [EOT], splice: true });
    const exact = mergeCalls(calls, { eotIds: [EOT], splice: false });
    checkInvariants(calls, spliced.traces, false);
    assert.ok(spliced.traces.length <= exact.traces.length);
    assert.deepEqual(
      spliced.traces[0]!.calls,
      ['c0', 'c3', 'c4'],
      'the retry c4 follows c3 onto the spliced chain',
    );
  });

  it('through the capture pipeline: written traces keep the invariants', async () => {
    await fc.assert(
      fc.asyncProperty(sessionArb, async (calls) => {
        const records = [
          session('s'),
          ...calls.map((c) =>
            call('s', {
              id: c.id,
              seq: c.seq,
              prompt: [...c.prompt],
              completion: [...c.completion],
              logprobs: c.logprobs === null ? null : [...c.logprobs],
              finish: c.finishReason,
              kind: c.requestKind ?? undefined,
            }),
          ),
          sessionEnd('s'),
        ];
        const { out } = await buildFrom(records);
        assert.equal(out.length, 1);
        const traces = (out[0] as { traces: (MergedTrace & { spliced_turns?: number })[] }).traces.map(
          (t) => ({
            ...t,
            spliced_turns: t.spliced_turns ?? 0,
          }),
        );
        checkInvariants(calls, traces, true);
      }),
      { numRuns: 40 },
    );
  });
});
