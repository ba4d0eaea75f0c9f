/**
 * The build of one session, with no I/O: its calls merged into traces, the filters (--exclude-kind,
 * --max-trace-tokens, --require-token-exact) applied, its status and token counts. What it adds to the
 * report comes back as its own BuildStats, which the caller adds to the run's.
 */
import type { SessionEndRecord } from '../capture/record.ts';
import type { MergeCall, MergedTrace, MergeResult } from './merge.ts';
import { mergeCalls } from './merge.ts';
import { isLengthStop, leastHeadroom } from './overlong.ts';
import type { Trace, TraceKind, TrajectoryRecord, TrajectoryStats } from './record.ts';
import { type BuildStats, count, emptyStats } from './stats.ts';

export interface SessionConfig {
  eotIds: readonly number[];
  splice: boolean;
  requireTokenExact: boolean;
  exclude: ReadonlySet<TraceKind>;
  maxTokens: number | null;
  maxMode: 'truncate' | 'drop';
  /** --unparsed-tool-calls mask: the sampled ids of such calls get mask 0 */
  maskUnparsed: boolean;
}

export interface SessionInput {
  /** the session's usable calls, in arrival order */
  calls: readonly MergeCall[];
  /** calls seen at all (usable or not) */
  seenCalls: number;
  /** calls recorded without token ids */
  textOnly: number;
}

export type SessionBuild =
  | { built: false; stats: BuildStats }
  | {
      built: true;
      status: TrajectoryRecord['status'];
      traces: Trace[];
      tstats: TrajectoryStats;
      stats: BuildStats;
    };

/** The contract form of a merged trace (optional fields only when set). */
function toTrace(t: MergedTrace, parent: number | undefined): Trace {
  const trace: Trace = {
    kind: t.kind,
    prompt_ids: t.prompt_ids,
    response_ids: t.response_ids,
    loss_mask: t.loss_mask,
    response_logprobs: t.response_logprobs,
    finish_reason: t.finish_reason,
    calls: t.calls,
    token_exact: t.token_exact,
  };
  if (parent !== undefined) trace.parent = parent;
  if (t.diverged_at !== undefined) trace.diverged_at = t.diverged_at;
  if (t.cut !== undefined) trace.cut = t.cut;
  if (t.after_compaction) trace.after_compaction = true;
  if (t.spliced_turns > 0) trace.spliced_turns = t.spliced_turns;
  if (t.tool_call_unparsed) trace.tool_call_unparsed = t.tool_call_unparsed;
  if (t.length_stopped) trace.length_stopped = t.length_stopped;
  if (t.headroom !== undefined) trace.headroom = t.headroom;
  return trace;
}

function countMerge(stats: BuildStats, merged: MergeResult): void {
  stats.calls_used += merged.stats.calls;
  stats.calls_merged += merged.stats.calls_merged;
  stats.chains += merged.stats.chains;
  stats.spliced_turns += merged.stats.spliced_turns;
  for (const [k, n] of Object.entries(merged.stats.kinds)) stats.kinds[k as TraceKind] += n;
  if (merged.stats.truncations > 0) count(stats.truncations, 'divergence', merged.stats.truncations);
  if (merged.stats.eot_from_prompt > 0) {
    count(
      stats.notes,
      'EOT not in sampled ids, taken from next prompt as glue',
      merged.stats.eot_from_prompt,
    );
  }
}

interface Kept {
  kept: { trace: MergedTrace; index: number }[];
  cut: Set<MergedTrace>;
}

/** --exclude-kind, then --max-trace-tokens (cut, or drop a trace whose prompt alone is over); null: drop all. */
function filterTraces(traces: readonly MergedTrace[], config: SessionConfig, stats: BuildStats): Kept | null {
  const { maxTokens } = config;
  const kept: Kept['kept'] = [];
  traces.forEach((trace, index) => {
    if (config.exclude.has(trace.kind)) count(stats.traces_dropped, `kind ${trace.kind} (--exclude-kind)`);
    else kept.push({ trace, index });
  });
  const cut = new Set<MergedTrace>();
  if (maxTokens === null) return { kept, cut };
  const over = kept.filter(({ trace }) => trace.prompt_ids.length + trace.response_ids.length > maxTokens);
  if (over.length > 0 && config.maxMode === 'drop') return null;
  const noRoom = new Set<MergedTrace>();
  for (const { trace } of over) {
    if (trace.prompt_ids.length >= maxTokens) {
      noRoom.add(trace);
      continue;
    }
    // the limit in force for the whole trace: its headroom goes below 0 by what was cut (overlong.ts)
    trace.headroom = leastHeadroom(
      trace.headroom ?? null,
      maxTokens - trace.prompt_ids.length - trace.response_ids.length,
    )!;
    const n = maxTokens - trace.prompt_ids.length;
    trace.response_ids.length = n;
    trace.loss_mask.length = n;
    if (trace.response_logprobs !== null) trace.response_logprobs.length = n;
    cut.add(trace);
  }
  // a prompt longer than the limit leaves nothing to train on: drop that trace
  for (let i = kept.length - 1; i >= 0; i--) {
    if (noRoom.has(kept[i]!.trace)) {
      count(stats.traces_dropped, 'prompt over --max-trace-tokens');
      kept.splice(i, 1);
    }
  }
  if (cut.size > 0) count(stats.truncations, 'max_tokens', cut.size);
  return { kept, cut };
}

function sessionStatus(
  end: SessionEndRecord | null,
  truncated: boolean,
  stats: BuildStats,
): TrajectoryRecord['status'] {
  let status: TrajectoryRecord['status'];
  if (end === null) {
    status = 'error';
    count(stats.notes, 'no session_end (status error)');
  } else if (end.status === 'interrupted') {
    status = 'error';
    count(stats.notes, 'interrupted session (status error)');
  } else status = end.status;
  if (status === 'completed' && truncated) status = 'truncated';
  count(stats.status, status);
  return status;
}

/** Builds one complete session. */
export function buildSession(
  input: SessionInput,
  end: SessionEndRecord | null,
  config: SessionConfig,
): SessionBuild {
  const stats = emptyStats();
  const skip = (reason: string): SessionBuild => {
    count(stats.sessions_skipped, reason);
    return { built: false, stats };
  };
  // stable sort: equal seq keeps arrival order
  const calls = input.calls.slice().sort((a, b) => a.seq - b.seq);
  if (calls.length === 0) {
    if (input.textOnly > 0) return skip('no token ids (text-only capture)');
    return skip(input.seenCalls > 0 ? 'no usable calls' : 'no calls');
  }
  const merged = mergeCalls(calls, {
    eotIds: config.eotIds,
    splice: config.splice,
    maskUnparsed: config.maskUnparsed,
  });
  countMerge(stats, merged);
  if (config.requireTokenExact && (input.textOnly > 0 || merged.traces.some((t) => !t.token_exact))) {
    return skip('not token-exact (--require-token-exact)');
  }
  const filtered = filterTraces(merged.traces, config, stats);
  if (filtered === null) return skip('over --max-trace-tokens (drop)');
  const { kept, cut } = filtered;
  if (kept.length === 0) return skip('no traces left after filters');
  const newIndex = new Map(kept.map(({ index }, i) => [index, i]));
  const traces = kept.map(({ trace }) => {
    const t = toTrace(trace, trace.parent === undefined ? undefined : newIndex.get(trace.parent));
    if (cut.has(trace)) t.truncated = true;
    return t;
  });
  const lastCall = calls[calls.length - 1]!;
  const status = sessionStatus(end, cut.size > 0 || isLengthStop(lastCall.finishReason), stats);
  let trainable = 0;
  let totalTokens = 0;
  for (const t of traces) {
    for (const m of t.loss_mask) trainable += m;
    totalTokens += t.prompt_ids.length + t.response_ids.length;
  }
  const tstats: TrajectoryStats = {
    calls: merged.stats.calls,
    calls_merged: merged.stats.calls_merged,
    chains: traces.length,
    truncations: merged.stats.truncations + cut.size,
    spliced_turns: merged.stats.spliced_turns,
    tokens_trainable: trainable,
    tokens_total: totalTokens,
  };
  return { built: true, status, traces, tstats, stats };
}
