/**
 * `polar build`: capture files -> trajectory records, streaming.
 *
 * Pass 1 (collect.ts) reads the inputs in order, line by line, grouping records per session. A session
 * is built (session.ts: merged, filtered; no I/O) as soon as its `session_end` arrives, or when its
 * input ends without one; only then are its calls released, so memory is bounded by the sessions open
 * at once (one, for capture files written one per session). The token data of each built trajectory
 * goes to a temporary file as serialised "tails" (spool.ts); memory keeps a compact summary (session,
 * task, reward, group). Pass 2, after all input (heads.ts): rewards (capture grading records,
 * including ones that came after the session was built, then --rewards) and groups are computed from
 * the summaries, and the spool is streamed to the output with each line's head (reward, group)
 * prepended, without parsing the tails again. Advantages are polar train's (docs/train.md). See
 * docs/trajectory-format.md.
 *
 * Every piece of state lives in one run of buildTrajectories: two builds in one process (the loop
 * builds every step) see nothing of each other.
 */
import type { Readable, Writable } from 'node:stream';
import type { SessionEndRecord, SessionRecord } from '../capture/record.ts';
import type { InputError } from '../errors.ts';
import { DEFAULTS, type OverlongMode, type UnparsedToolCallMode } from '../options/defaults.ts';
import { collectSessions, type OpenSession } from './collect.ts';
import { encodeTails, type OutputFormat, type TrajectoryHead } from './formats.ts';
import { type GroupBy, resolveHeads, type Summary } from './heads.ts';
import { scanInputs } from './inputs.ts';
import { isOverlong, rolloutHeadroom } from './overlong.ts';
import type { TraceKind } from './record.ts';
import { type RewardTable, readRewards } from './rewards.ts';
import { buildSession, type SessionConfig } from './session.ts';
import { Spool } from './spool.ts';
import { addStats, type BuildStats, emptyStats } from './stats.ts';

export { expandInputs } from './inputs.ts';

export interface BuildOptions {
  /** capture files, directories (scanned recursively for *.jsonl) and `-` for stdin */
  inputs: string[];
  stdin?: Readable;
  /** where the trajectories go; null: compute the report only */
  output: Writable | null;
  format?: OutputFormat;
  /** JSONL of {session, reward} or {task_id, sample, reward} */
  rewards?: string | null;
  /** task_id (default), none, or meta:KEY (a key of the session record's meta) */
  groupBy?: GroupBy;
  dropUniformGroups?: boolean;
  /** longest trace (prompt + response tokens) kept */
  maxTokens?: number | null;
  /** truncate: cut longer traces (marked truncated); drop: drop the whole trajectory */
  maxTokensMode?: 'truncate' | 'drop';
  excludeKinds?: readonly TraceKind[];
  /** drop sessions with any call lacking server token ids or logprobs */
  requireTokenExact?: boolean;
  skipInvalid?: boolean;
  eotIds?: readonly number[];
  splice?: boolean;
  /** a trajectory with a tool call the server did not parse: zero (default), mask or keep (heads.ts) */
  unparsedToolCalls?: UnparsedToolCallMode;
  /** what overlong traces train (overlong.ts): recorded for polar train, applied to verl rows */
  overlong?: OverlongMode;
  /** --overlong-buffer: DAPO's L_cache, in tokens */
  overlongBuffer?: number;
  /** where the temporary file goes (default: the OS temp dir) */
  tmpDir?: string;
  /** called for each skipped invalid line (the first few are worth showing) */
  onInvalid?: (error: InputError) => void;
}

/** The summary of a session that produced no trajectory (or before its build). */
function summaryOf(header: SessionRecord, state: OpenSession, metaKey: string | null): Summary {
  return {
    session: header.id,
    taskId: header.task_id,
    sample: header.sample ?? null,
    metaGroup: metaKey === null ? null : (header.meta[metaKey] ?? null),
    harness: header.harness,
    model: header.model,
    status: 'error',
    grading: state.grading,
    rowBytes: [],
    traces: 0,
    tokensTrainable: 0,
    tokensTotal: 0,
    unparsedCalls: 0,
    overlongTraces: 0,
    headroom: null,
    policyVersion: state.policyVersion,
  };
}

function sessionConfig(options: BuildOptions): SessionConfig {
  return {
    eotIds: options.eotIds ?? DEFAULTS.eotIds.value,
    splice: options.splice ?? false,
    requireTokenExact: options.requireTokenExact ?? false,
    exclude: new Set(options.excludeKinds ?? []),
    maxTokens: options.maxTokens ?? null,
    maxMode: options.maxTokensMode ?? DEFAULTS.overMaxTraceTokens.value,
    maskUnparsed: options.unparsedToolCalls === 'mask',
  };
}

/** Counts what is written: the trajectories whose head survived pass 2. */
function countWritten(
  stats: BuildStats,
  summaries: readonly Summary[],
  heads: readonly (TrajectoryHead | null)[],
  mode: OverlongMode,
): void {
  for (let i = 0; i < summaries.length; i++) {
    if (heads[i] === null) continue;
    stats.trajectories_written++;
    stats.traces_written += summaries[i]!.traces;
    stats.tokens_trainable += summaries[i]!.tokensTrainable;
    stats.tokens_total += summaries[i]!.tokensTotal;
    countOverlong(stats, summaries[i]!, heads[i] as TrajectoryHead, mode);
  }
}

/** The overlong traces written, and what --overlong does to them (applied by polar train, or in verl rows). */
function countOverlong(stats: BuildStats, s: Summary, head: TrajectoryHead, mode: OverlongMode): void {
  if (s.overlongTraces > 0) {
    stats.traces_overlong += s.overlongTraces;
    stats.trajectories_overlong++;
    if (mode === 'mask') stats.overlong_masked += s.overlongTraces;
  }
  if (head.lengthPenalty < 0) stats.overlong_penalised++;
}

/** Runs the build; returns its report. Throws InputError on bad input unless skipInvalid. */
export async function buildTrajectories(options: BuildOptions): Promise<BuildStats> {
  const format = options.format ?? DEFAULTS.buildFormat.value;
  const groupBy = options.groupBy ?? DEFAULTS.groupBy.value;
  const metaKey = groupBy.startsWith('meta:') ? groupBy.slice('meta:'.length) : null;
  const config = sessionConfig(options);
  const stats = emptyStats();
  const overlong = {
    mode: options.overlong ?? DEFAULTS.overlong.value,
    buffer: options.overlongBuffer ?? DEFAULTS.overlongBuffer.value,
  };

  const rewardTable: RewardTable | null = options.rewards ? await readRewards(options.rewards) : null;
  const inputs = await scanInputs(options.inputs);
  stats.inputs = inputs.files.length;

  const summaries: Summary[] = [];
  const spool = options.output === null ? null : await Spool.open(format, options.tmpDir);

  const onSession = async (state: OpenSession, end: SessionEndRecord | null): Promise<Summary> => {
    const calls = state.calls;
    state.calls = []; // released: the summary is all that stays
    const result = buildSession({ calls, seenCalls: state.seenCalls, textOnly: state.textOnly }, end, config);
    addStats(stats, result.stats);
    const summary = summaryOf(state.header, state, metaKey);
    if (!result.built) return summary;
    summary.status = result.status;
    summary.traces = result.traces.length;
    summary.tokensTrainable = result.tstats.tokens_trainable;
    summary.tokensTotal = result.tstats.tokens_total;
    for (const t of result.traces) summary.unparsedCalls += t.tool_call_unparsed ?? 0;
    if (summary.unparsedCalls > 0) stats.trajectories_tool_unparsed++;
    for (const t of result.traces) if (isOverlong(t)) summary.overlongTraces++;
    summary.headroom = rolloutHeadroom(result.traces);
    if (spool !== null) {
      const tails = encodeTails(format, result.traces, result.tstats, {
        maskOverlong: overlong.mode === 'mask',
      });
      summary.rowBytes = await spool.append(tails);
    }
    summaries.push(summary);
    return summary;
  };

  try {
    await collectSessions(inputs, options, stats, onSession);
    await spool?.finish();
    const heads = resolveHeads(summaries, {
      rewardTable,
      groupBy,
      dropUniform: options.dropUniformGroups ?? false,
      unparsed: options.unparsedToolCalls ?? DEFAULTS.unparsedToolCalls.value,
      overlong,
      stats,
    });
    countWritten(stats, summaries, heads, overlong.mode);
    if (options.output !== null && spool !== null) {
      await spool.replay(
        options.output,
        summaries.map((s) => s.rowBytes),
        heads,
      );
    }
    return stats;
  } finally {
    await spool?.dispose();
  }
}
