/**
 * Prefix merging on hand-built captures: plain chain, tool round trips, EOT present or missing,
 * truncation by length, compaction, interleaved subagent, divergence, missing logprobs, text-only.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type MergeCall, mergeCalls } from '../../../src/trajectory/merge.ts';
import { buildFrom, call, EOT, grading, ids, session, sessionEnd } from './builder.ts';

type Out = {
  status: string;
  traces: {
    kind: string;
    prompt_ids: number[];
    response_ids: number[];
    loss_mask: number[];
    response_logprobs: number[] | null;
    calls: string[];
    token_exact: boolean;
    finish_reason: string | null;
    parent?: number;
    diverged_at?: number;
    cut?: string;
    truncated?: boolean;
    after_compaction?: boolean;
  }[];
  stats: Record<string, number>;
};

const SYS = ids(1, 8); // system prompt + first user message
const lp = (n: number): number[] => Array.from({ length: n }, (_, i) => -(i + 1) / 10);

describe('prefix merging', () => {
  it('merges a plain two-call chain: prompt, sampled (mask 1), glue (mask 0), sampled', async () => {
    const c1 = [100, 101, EOT];
    const glue = [300, 301, 302];
    const c2 = [102, 103, 104, EOT];
    const { out } = await buildFrom([
      session('s'),
      call('s', { id: 'a', prompt: SYS, completion: c1 }),
      call('s', { id: 'b', prompt: [...SYS, ...c1, ...glue], completion: c2 }),
      sessionEnd('s'),
    ]);
    assert.equal(out.length, 1);
    const t = (out[0] as Out).traces;
    assert.equal(t.length, 1);
    assert.deepEqual(t[0]!.prompt_ids, SYS);
    assert.deepEqual(t[0]!.response_ids, [...c1, ...glue, ...c2]);
    assert.deepEqual(t[0]!.loss_mask, [1, 1, 1, 0, 0, 0, 1, 1, 1, 1]);
    assert.deepEqual(t[0]!.response_logprobs, [...lp(3), 0, 0, 0, ...lp(4)]);
    assert.deepEqual(t[0]!.calls, ['a', 'b']);
    assert.equal(t[0]!.kind, 'root');
    assert.equal(t[0]!.token_exact, true);
    assert.equal((out[0] as Out).stats.calls_merged, 1);
  });

  it('keeps merging across several tool round trips into one trace', async () => {
    const records: unknown[] = [session('s')];
    let prompt = SYS;
    const expected: number[] = [];
    const mask: number[] = [];
    for (let turn = 0; turn < 5; turn++) {
      const completion = [1000 + turn * 10, 1001 + turn * 10, EOT];
      records.push(call('s', { id: `t${turn}`, prompt, completion }));
      const tool = ids(5000 + turn * 100, 4 + turn); // tool output + template glue
      expected.push(...completion, ...(turn < 4 ? tool : []));
      mask.push(1, 1, 1, ...(turn < 4 ? tool.map(() => 0) : []));
      prompt = [...prompt, ...completion, ...tool];
    }
    records.push(sessionEnd('s'));
    const { out, stats } = await buildFrom(records);
    const t = (out[0] as Out).traces;
    assert.equal(t.length, 1);
    assert.deepEqual(t[0]!.response_ids, expected);
    assert.deepEqual(t[0]!.loss_mask, mask);
    assert.equal(stats.calls_merged, 4);
    assert.equal(stats.calls_used, 5);
  });

  it('EOT missing from the sampled ids (stop token stripped): the EOT in the next prompt is mask-0 glue', async () => {
    const c1 = [100, 101]; // no EOT: the server stripped the stop token
    const next = [...SYS, ...c1, EOT, 300, 301];
    const { out, stats } = await buildFrom([
      session('s'),
      call('s', { prompt: SYS, completion: c1 }),
      call('s', { prompt: next, completion: [102, EOT] }),
      sessionEnd('s'),
    ]);
    assert.equal(stats.notes['EOT not in sampled ids, taken from next prompt as glue'], 1);
    const t = (out[0] as Out).traces[0]!;
    assert.deepEqual(t.response_ids, [100, 101, EOT, 300, 301, 102, EOT]);
    assert.deepEqual(t.loss_mask, [1, 1, 0, 0, 0, 1, 1]);
    assert.deepEqual(t.response_logprobs, [-0.1, -0.2, 0, 0, 0, -0.1, -0.2]);
  });

  it('EOT present in the sampled ids: it is trained (mask 1) and not duplicated from the next prompt', async () => {
    const c1 = [100, EOT];
    const { out, stats } = await buildFrom([
      session('s'),
      call('s', { prompt: SYS, completion: c1 }),
      call('s', { prompt: [...SYS, ...c1, 300], completion: [102] }),
      sessionEnd('s'),
    ]);
    const t = (out[0] as Out).traces[0]!;
    assert.deepEqual(t.response_ids, [100, EOT, 300, 102]);
    assert.deepEqual(t.loss_mask, [1, 1, 0, 1]);
    assert.equal(t.response_ids.filter((x) => x === EOT).length, 1);
    assert.deepEqual(stats.notes, {});
  });

  it('a session whose last call stopped on length is status truncated', async () => {
    const { out } = await buildFrom([
      session('s'),
      call('s', { prompt: SYS, completion: [100, EOT] }),
      call('s', { prompt: [...SYS, 100, EOT, 300], completion: [101, 102, 103], finish: 'length' }),
      sessionEnd('s'),
    ]);
    const o = out[0] as Out;
    assert.equal(o.status, 'truncated');
    assert.equal(o.traces[0]!.finish_reason, 'length');
    assert.deepEqual(o.traces[0]!.response_ids, [100, EOT, 300, 101, 102, 103]);
  });

  it('--max-tokens truncate cuts the trace and marks it; drop drops the trajectory, counted', async () => {
    const records = [
      session('s'),
      call('s', { prompt: SYS, completion: [100, EOT] }),
      call('s', { prompt: [...SYS, 100, EOT, 300], completion: [101, 102, EOT] }),
      sessionEnd('s'),
    ];
    const cut = await buildFrom(records, { maxTokens: 12 });
    const o = cut.out[0] as Out;
    assert.equal(o.status, 'truncated');
    const t = o.traces[0]!;
    assert.equal(t.truncated, true);
    assert.equal(t.prompt_ids.length + t.response_ids.length, 12);
    assert.deepEqual(t.response_ids, [100, EOT, 300, 101]);
    assert.equal(t.loss_mask.length, 4);
    assert.equal(t.response_logprobs!.length, 4);
    assert.equal(cut.stats.truncations.max_tokens, 1);

    const dropped = await buildFrom(records, { maxTokens: 12, maxTokensMode: 'drop' });
    assert.equal(dropped.out.length, 0);
    assert.equal(dropped.stats.sessions_skipped['over --max-trace-tokens (drop)'], 1);

    const tiny = await buildFrom(records, { maxTokens: SYS.length });
    assert.equal(tiny.out.length, 0);
    assert.equal(tiny.stats.traces_dropped['prompt over --max-trace-tokens'], 1);
    assert.equal(tiny.stats.sessions_skipped['no traces left after filters'], 1);

    const fits = await buildFrom(records, { maxTokens: 14 });
    assert.equal((fits.out[0] as Out).traces[0]!.truncated, undefined);
    assert.equal((fits.out[0] as Out).status, 'completed');
  });

  it('a compaction call gets its own trace; the resumed conversation starts a root trace after it', async () => {
    const c1 = [100, EOT];
    const long = [...SYS, ...c1, 300, 301];
    const summaryPrompt = [...long, 900, 901]; // "CONTEXT CHECKPOINT COMPACTION" message appended
    const resumed = [1, 2, 3, 950, 951, 952]; // history replaced by the summary
    const { out, stats } = await buildFrom([
      session('s'),
      call('s', { id: 'a', prompt: SYS, completion: c1 }),
      call('s', { id: 'b', prompt: long, completion: [101, EOT] }),
      call('s', { id: 'c', prompt: summaryPrompt, completion: [700, 701, EOT], kind: 'compaction' }),
      call('s', { id: 'd', prompt: resumed, completion: [102, EOT], kind: 'turn' }),
      call('s', { id: 'e', prompt: [...resumed, 102, EOT, 400], completion: [103, EOT], kind: 'turn' }),
      sessionEnd('s'),
    ]);
    const t = (out[0] as Out).traces;
    assert.deepEqual(
      t.map((x) => x.kind),
      ['root', 'compaction', 'root'],
    );
    assert.deepEqual(t[0]!.calls, ['a', 'b']);
    assert.deepEqual(t[1]!.calls, ['c']);
    assert.deepEqual(t[1]!.prompt_ids, summaryPrompt);
    assert.deepEqual(t[2]!.calls, ['d', 'e']);
    assert.equal(t[2]!.after_compaction, true);
    assert.equal(stats.kinds.compaction, 1);

    const excluded = await buildFrom(
      [
        session('s'),
        call('s', { prompt: SYS, completion: c1 }),
        call('s', { prompt: summaryPrompt, completion: [700], kind: 'compaction' }),
        sessionEnd('s'),
      ],
      { excludeKinds: ['compaction'] },
    );
    assert.deepEqual(
      (excluded.out[0] as Out).traces.map((x) => x.kind),
      ['root'],
    );
    assert.equal(excluded.stats.traces_dropped['kind compaction (--exclude-kind)'], 1);
  });

  it('routes interleaved subagent calls to their own chain (longest matching chain wins)', async () => {
    const sub = ids(7000, 6); // another system prompt
    const m1 = [100, EOT];
    const s1 = [200, EOT];
    const mainP2 = [...SYS, ...m1, 300];
    const subP2 = [...sub, ...s1, 400];
    const { out, stats } = await buildFrom([
      session('s'),
      call('s', { id: 'm1', prompt: SYS, completion: m1 }),
      call('s', { id: 's1', prompt: sub, completion: s1 }),
      call('s', { id: 'm2', prompt: mainP2, completion: [101, EOT] }),
      call('s', { id: 's2', prompt: subP2, completion: [201, EOT] }),
      call('s', { id: 'm3', prompt: [...mainP2, 101, EOT, 301], completion: [102] }),
      sessionEnd('s'),
    ]);
    const t = (out[0] as Out).traces;
    assert.equal(t.length, 2);
    assert.equal(t[0]!.kind, 'root');
    assert.deepEqual(t[0]!.calls, ['m1', 'm2', 'm3']);
    assert.equal(t[1]!.kind, 'subagent');
    assert.deepEqual(t[1]!.calls, ['s1', 's2']);
    assert.deepEqual([...t[1]!.prompt_ids, ...t[1]!.response_ids], [...subP2, 201, EOT]);
    assert.equal(stats.calls_merged, 3);
  });

  it('longest match: a call extending both a chain and its shorter sibling joins the longer', () => {
    const mk = (id: string, prompt: number[], completion: number[]): MergeCall => ({
      id,
      seq: 0,
      prompt,
      completion,
      logprobs: completion.map(() => -1),
      tokenExact: true,
      finishReason: 'stop',
      requestKind: null,
      traceKind: null,
    });
    // two chains where one is a prefix of the other (a subagent forked from the same system prompt)
    const r = mergeCalls(
      [
        mk('a', [1, 2], [3]),
        mk('b', [1, 2, 3, 4], [5]),
        mk('side', [1, 2, 9], [7]),
        mk('c', [1, 2, 3, 4, 5, 6], [8]),
      ],
      { eotIds: [EOT], splice: false },
    );
    assert.deepEqual(
      r.traces.map((t) => t.calls),
      [['a', 'b', 'c'], ['side']],
    );
    // the branch shares the first prompt: a divergence (a fork), but the parent went on, so it is not cut
    assert.equal(r.traces[1]!.kind, 'divergence');
    assert.equal(r.traces[0]!.cut, undefined);
    assert.equal(r.stats.truncations, 0);
  });

  it('divergence: a call that breaks the prefix inside the responses starts a divergence trace; the parent is cut', async () => {
    const c1 = [100, EOT];
    const p2 = [...SYS, ...c1, 300];
    const c2 = [101, 102, EOT];
    // the template re-rendered the first assistant turn differently (e.g. dropped a <think> block)
    const p3 = [...SYS, 999, EOT, 300, 101, 102, EOT, 301];
    const { out, stats } = await buildFrom([
      session('s'),
      call('s', { id: 'a', prompt: SYS, completion: c1 }),
      call('s', { id: 'b', prompt: p2, completion: c2 }),
      call('s', { id: 'c', prompt: p3, completion: [103, EOT] }),
      call('s', { id: 'd', prompt: [...p3, 103, EOT, 302], completion: [104, EOT] }),
      sessionEnd('s'),
    ]);
    const t = (out[0] as Out).traces;
    assert.deepEqual(
      t.map((x) => x.kind),
      ['root', 'divergence'],
    );
    assert.deepEqual(t[0]!.calls, ['a', 'b']);
    assert.equal(t[0]!.cut, 'divergence');
    assert.deepEqual(t[1]!.calls, ['c', 'd']);
    assert.equal(t[1]!.parent, 0);
    assert.equal(t[1]!.diverged_at, SYS.length);
    assert.deepEqual(t[1]!.prompt_ids, p3);
    assert.equal(stats.truncations.divergence, 1);
    assert.equal((out[0] as Out).stats.truncations, 1);
  });

  it('--splice joins a re-rendered assistant turn by replacing it with the sampled ids', async () => {
    const c1 = [100, 101, EOT];
    const p2 = [...SYS, 100, 555, EOT, 300, 301]; // [101] re-tokenized as [555]
    const records = [
      session('s'),
      call('s', { prompt: SYS, completion: c1 }),
      call('s', { prompt: p2, completion: [102, EOT] }),
      sessionEnd('s'),
    ];
    const spliced = await buildFrom(records, { splice: true });
    const t = (spliced.out[0] as Out).traces;
    assert.equal(t.length, 1);
    assert.deepEqual(t[0]!.response_ids, [100, 101, EOT, 300, 301, 102, EOT]);
    assert.deepEqual(t[0]!.loss_mask, [1, 1, 1, 0, 0, 1, 1]);
    assert.equal(spliced.stats.spliced_turns, 1);
    assert.equal((spliced.out[0] as Out).stats.spliced_turns, 1);

    // sampled ids without EOT: the EOT of the re-rendered turn is kept as glue
    const noEot = await buildFrom(
      [
        session('s'),
        call('s', { prompt: SYS, completion: [100, 101] }),
        call('s', { prompt: p2, completion: [102] }),
        sessionEnd('s'),
      ],
      { splice: true },
    );
    assert.deepEqual((noEot.out[0] as Out).traces[0]!.response_ids, [100, 101, EOT, 300, 301, 102]);

    const exact = await buildFrom(records);
    assert.deepEqual(
      (exact.out[0] as Out).traces.map((x) => x.kind),
      ['root', 'divergence'],
    );
  });

  it('missing logprobs: the trace has response_logprobs null and is not token-exact; --require-token-exact drops it', async () => {
    const records = [
      session('s'),
      call('s', { prompt: SYS, completion: [100, EOT] }),
      call('s', { prompt: [...SYS, 100, EOT, 300], completion: [101], logprobs: null }),
      sessionEnd('s'),
    ];
    const { out } = await buildFrom(records);
    const t = (out[0] as Out).traces[0]!;
    assert.equal(t.response_logprobs, null);
    assert.equal(t.token_exact, false);
    assert.deepEqual(t.loss_mask, [1, 1, 0, 1]);

    const strict = await buildFrom(records, { requireTokenExact: true });
    assert.equal(strict.out.length, 0);
    assert.equal(strict.stats.sessions_skipped['not token-exact (--require-token-exact)'], 1);
  });

  it('text-only capture (no token ids) yields no trajectory, counted as skipped', async () => {
    const { out, stats } = await buildFrom([
      session('s', { backend: { kind: 'openai', url: null, token_exact: false } }),
      call('s', { prompt: null, completion: null }),
      call('s', { prompt: null, completion: null }),
      sessionEnd('s'),
      grading('s', 1),
    ]);
    assert.equal(out.length, 0);
    assert.equal(stats.calls_skipped['no token ids'], 2);
    assert.equal(stats.sessions_skipped['no token ids (text-only capture)'], 1);
    assert.equal(stats.notes['grading for unknown session'], undefined);
  });

  it('counts the calls whose ids are not token-exact by cause (backend_info.token_inexact)', async () => {
    const inexact = call('s', {
      id: 'b',
      prompt: [...SYS, 100, EOT, 300],
      completion: [101],
      tokenExact: false,
    });
    inexact.backend_info = { token_inexact: { cause: 'ids_dropped_by_server', detail: '1 for 4' } };
    const { out, stats } = await buildFrom([
      session('s'),
      call('s', { id: 'a', prompt: SYS, completion: [100, EOT] }),
      inexact,
      sessionEnd('s'),
    ]);
    assert.equal((out[0] as Out).traces[0]!.token_exact, false);
    assert.deepEqual(stats.calls_inexact, { ids_dropped_by_server: 1 });
  });

  it('skips and counts calls with an error, keeping the chain intact', async () => {
    const { out, stats } = await buildFrom([
      session('s'),
      call('s', { id: 'a', prompt: SYS, completion: [100, EOT] }),
      call('s', { id: 'x', prompt: [...SYS, 100, EOT, 300], completion: null, error: true }),
      call('s', { id: 'b', prompt: [...SYS, 100, EOT, 300], completion: [101] }),
      sessionEnd('s'),
    ]);
    assert.deepEqual((out[0] as Out).traces[0]!.calls, ['a', 'b']);
    assert.equal(stats.calls_skipped['call error'], 1);
  });
});
