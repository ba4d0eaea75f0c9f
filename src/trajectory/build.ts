/**
 * `polar build`: capture files -> trajectory records, streaming.
 *
 * Pass 1 reads the inputs in order, line by line, grouping records per session. A session is built
 * (merged, filtered, serialised) as soon as its `session_end` arrives, or when its input ends without
 * one; only then are its calls released, so memory is bounded by the sessions open at once (one, for
 * capture files written one per session). The token data of each built trajectory goes to a temporary
 * file as a serialised "tail"; memory keeps a compact summary (session, task, reward, group).
 * Pass 2, after all input: rewards (capture grading records, including ones that came after the
 * session was built, then --rewards), groups and advantages are computed from the summaries, and the
 * temporary file is streamed to the output with each line's head (reward, group, advantage) prepended,
 * without parsing the tails again. See docs/trajectory-format.md.
 */
import { once } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdtemp, open as openFile, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { validateCaptureRecord } from '../capture/reader.ts';
import type { CallRecord, GradingRecord, SessionEndRecord, SessionRecord } from '../capture/record.ts';
import { InputError, PolarError } from '../errors.ts';
import { parseJsonLine, readLines } from '../util/jsonl.ts';
import { type AdvantageKind, groupAdvantages, isUniform } from './advantage.ts';
import { encodeHead, encodeTails, type OutputFormat, type TrajectoryHead } from './formats.ts';
import { type MergeCall, type MergedTrace, mergeCalls } from './merge.ts';
import type { Trace, TraceKind, TrajectoryRecord, TrajectoryStats } from './record.ts';
import { lookupReward, type RewardTable, readRewards } from './rewards.ts';
import { type BuildStats, count, emptyStats } from './stats.ts';

export const DEFAULT_EOT_IDS = [151645, 151643] as const;

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
  groupBy?: string;
  advantage?: AdvantageKind;
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
  /** where the temporary file goes (default: the OS temp dir) */
  tmpDir?: string;
  /** called for each skipped invalid line (the first few are worth showing) */
  onInvalid?: (error: InputError) => void;
}

interface OpenSession {
  header: SessionRecord;
  calls: MergeCall[];
  callIds: Set<string>;
  seqs: Set<number>;
  maxSeq: number;
  seenCalls: number;
  textOnly: number;
  grading: GradingRecord | null;
}

interface Summary {
  session: string;
  taskId: string | null;
  sample: number | null;
  metaGroup: string | null;
  harness: string;
  model: string;
  status: TrajectoryRecord['status'];
  grading: GradingRecord | null;
  /** byte length of each serialised tail (output line) in the temporary file */
  rowBytes: number[];
  traces: number;
  tokensTrainable: number;
  tokensTotal: number;
}

/** Files found by scanning a directory (not named by the user): non-capture JSONL there is skipped. */
const discovered = new Set<string>();

/** Whether a parsed first line looks like a capture record at all (any version, any capture type). */
function captureShaped(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const { v, type } = value as { v?: unknown; type?: unknown };
  return typeof v === 'number' && ['session', 'call', 'session_end', 'grading'].includes(String(type));
}

/** Expands the inputs: directories to their *.jsonl files (sorted, recursive); `-` stays. */
export async function expandInputs(inputs: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const input of inputs) {
    if (input === '-') {
      out.push(input);
      continue;
    }
    let info: Awaited<ReturnType<typeof stat>>;
    try {
      info = await stat(input);
    } catch {
      throw new InputError(input, undefined, undefined, 'no such file or directory');
    }
    if (!info.isDirectory()) {
      out.push(input);
      continue;
    }
    const entries = await readdir(input, { recursive: true, withFileTypes: true });
    const files = entries
      .filter((e) => e.isFile() && e.name.endsWith('.jsonl'))
      .map((e) => join(e.parentPath ?? (e as { path?: string }).path ?? input, e.name))
      .sort();
    for (const file of files) discovered.add(file);
    out.push(...files);
  }
  return out;
}

/** Writes strings to a stream, waiting when it asks to. */
async function write(stream: Writable, text: string | Buffer): Promise<void> {
  const closed = (error: unknown): PolarError => {
    const code = (error as NodeJS.ErrnoException | null)?.code;
    return new PolarError(`the output closed before the build finished${code ? ` (${code})` : ''}`);
  };
  if (stream.errored || stream.destroyed) throw closed(stream.errored);
  if (stream.write(text)) return;
  try {
    await once(stream, 'drain');
  } catch (error) {
    throw closed(error);
  }
}

async function closeStream(stream: WriteStream): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    stream.once('error', reject);
    stream.end(() => resolve());
  });
}

function toMergeCall(call: CallRecord): MergeCall {
  const meta = call.harness_meta;
  return {
    id: call.id,
    seq: call.seq,
    prompt: call.prompt_token_ids!,
    completion: call.completion_token_ids!,
    logprobs: call.completion_logprobs,
    tokenExact: call.token_exact,
    finishReason: call.finish_reason,
    requestKind: typeof meta.request_kind === 'string' ? meta.request_kind : null,
    traceKind: typeof meta.trace_kind === 'string' ? meta.trace_kind : null,
  };
}

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
  return trace;
}

function groupKey(groupBy: string, s: Summary): string | null {
  if (groupBy === 'none') return null;
  if (groupBy === 'task_id') return s.taskId;
  return s.metaGroup;
}

/** Runs the build; returns its report. Throws InputError on bad input unless skipInvalid. */
export async function buildTrajectories(options: BuildOptions): Promise<BuildStats> {
  const format = options.format ?? 'polar';
  const groupBy = options.groupBy ?? 'task_id';
  const advantage = options.advantage ?? 'grpo';
  const eotIds = options.eotIds ?? DEFAULT_EOT_IDS;
  const exclude = new Set(options.excludeKinds ?? []);
  const maxTokens = options.maxTokens ?? null;
  const maxMode = options.maxTokensMode ?? 'truncate';
  const metaKey = groupBy.startsWith('meta:') ? groupBy.slice('meta:'.length) : null;
  const stats = emptyStats();

  const rewardTable: RewardTable | null = options.rewards ? await readRewards(options.rewards) : null;
  const inputs = await expandInputs(options.inputs);
  stats.inputs = inputs.length;

  const open = new Map<string, OpenSession>();
  const built = new Map<string, Summary>();
  const summaries: Summary[] = [];

  let tmp: string | null = null;
  let sink: WriteStream | null = null;
  if (options.output !== null) {
    tmp = await mkdtemp(join(options.tmpDir ?? tmpdir(), 'polar-build-'));
    sink = createWriteStream(join(tmp, 'tails.jsonl'), { encoding: 'utf8' });
  }

  const finish = async (state: OpenSession, end: SessionEndRecord | null): Promise<void> => {
    const header = state.header;
    open.delete(header.id);
    const skip = (reason: string): void => {
      count(stats.sessions_skipped, reason);
    };
    // stable sort: equal seq keeps arrival order
    const calls = state.calls.slice().sort((a, b) => a.seq - b.seq);
    state.calls = [];
    if (calls.length === 0) {
      built.set(header.id, placeholder(header, state));
      if (state.textOnly > 0) skip('no token ids (text-only capture)');
      else skip(state.seenCalls > 0 ? 'no usable calls' : 'no calls');
      return;
    }
    const merged = mergeCalls(calls, { eotIds, splice: options.splice ?? false });
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

    if (options.requireTokenExact && (state.textOnly > 0 || merged.traces.some((t) => !t.token_exact))) {
      built.set(header.id, placeholder(header, state));
      skip('not token-exact (--require-token-exact)');
      return;
    }

    // filters: excluded kinds, then --max-tokens
    const kept: { trace: MergedTrace; index: number }[] = [];
    merged.traces.forEach((trace, index) => {
      if (exclude.has(trace.kind)) count(stats.traces_dropped, `kind ${trace.kind} (--exclude-kind)`);
      else kept.push({ trace, index });
    });
    let cutByMax = 0;
    const cut = new Set<MergedTrace>();
    if (maxTokens !== null) {
      const over = kept.filter(
        ({ trace }) => trace.prompt_ids.length + trace.response_ids.length > maxTokens,
      );
      if (over.length > 0 && maxMode === 'drop') {
        built.set(header.id, placeholder(header, state));
        skip('over --max-tokens (drop)');
        return;
      }
      const noRoom = new Set<MergedTrace>();
      for (const { trace } of over) {
        if (trace.prompt_ids.length >= maxTokens) {
          noRoom.add(trace);
          continue;
        }
        const n = maxTokens - trace.prompt_ids.length;
        trace.response_ids.length = n;
        trace.loss_mask.length = n;
        if (trace.response_logprobs !== null) trace.response_logprobs.length = n;
        cut.add(trace);
        cutByMax++;
      }
      // a prompt longer than the limit leaves nothing to train on: drop that trace
      for (let i = kept.length - 1; i >= 0; i--) {
        if (noRoom.has(kept[i]!.trace)) {
          count(stats.traces_dropped, 'prompt over --max-tokens');
          kept.splice(i, 1);
        }
      }
      if (cutByMax > 0) count(stats.truncations, 'max_tokens', cutByMax);
    }
    if (kept.length === 0) {
      built.set(header.id, placeholder(header, state));
      skip('no traces left after filters');
      return;
    }
    const newIndex = new Map(kept.map(({ index }, i) => [index, i]));
    const traces = kept.map(({ trace }) => {
      const t = toTrace(trace, trace.parent === undefined ? undefined : newIndex.get(trace.parent));
      if (cut.has(trace)) t.truncated = true;
      return t;
    });

    let status: TrajectoryRecord['status'];
    if (end === null) {
      status = 'error';
      count(stats.notes, 'no session_end (status error)');
    } else if (end.status === 'interrupted') {
      status = 'error';
      count(stats.notes, 'interrupted session (status error)');
    } else status = end.status;
    const lastCall = calls[calls.length - 1]!;
    if (status === 'completed' && (cutByMax > 0 || lastCall.finishReason === 'length')) status = 'truncated';
    count(stats.status, status);

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
      truncations: merged.stats.truncations + cutByMax,
      spliced_turns: merged.stats.spliced_turns,
      tokens_trainable: trainable,
      tokens_total: totalTokens,
    };
    const rowBytes: number[] = [];
    if (sink !== null) {
      for (const tail of encodeTails(format, traces, tstats)) {
        const bytes = Buffer.from(tail, 'utf8');
        rowBytes.push(bytes.length);
        await write(sink, bytes);
      }
    }
    const summary: Summary = {
      ...placeholder(header, state),
      status,
      rowBytes,
      traces: traces.length,
      tokensTrainable: trainable,
      tokensTotal: totalTokens,
    };
    built.set(header.id, summary);
    summaries.push(summary);
  };

  const placeholder = (header: SessionRecord, state: OpenSession): Summary => ({
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
  });

  try {
    for (const source of inputs) {
      let first = true;
      for await (const line of readLines(source, options.stdin)) {
        if (first) {
          first = false;
          // a directory holds other JSONL too (polar eval's results.jsonl, predictions.jsonl): a scanned
          // file whose first line is not a capture record is skipped as a whole, and counted
          if (discovered.has(source)) {
            let value: unknown;
            try {
              value = JSON.parse(line.text);
            } catch {}
            if (!captureShaped(value)) {
              count(stats.files_skipped, 'not a capture file (found in a directory)');
              break;
            }
          }
        }
        stats.lines++;
        let record: ReturnType<typeof validateCaptureRecord>;
        try {
          record = validateCaptureRecord(source, line.line, parseJsonLine(source, line));
        } catch (error) {
          if (options.skipInvalid && error instanceof InputError) {
            count(stats.lines_skipped, error.field === undefined ? 'invalid JSON' : 'schema-invalid');
            options.onInvalid?.(error);
            continue;
          }
          throw error;
        }
        switch (record.type) {
          case 'session': {
            stats.sessions++;
            if (open.has(record.id)) count(stats.notes, 'repeated session record (ignored)');
            else if (built.has(record.id)) count(stats.sessions_skipped, 'duplicate session id');
            else
              open.set(record.id, {
                header: record,
                calls: [],
                callIds: new Set(),
                seqs: new Set(),
                maxSeq: -1,
                seenCalls: 0,
                textOnly: 0,
                grading: null,
              });
            break;
          }
          case 'call': {
            stats.calls++;
            const state = open.get(record.session);
            if (state === undefined) {
              count(
                stats.calls_skipped,
                built.has(record.session) ? 'session already built (after session_end)' : 'unknown session',
              );
              break;
            }
            if (state.callIds.has(record.id)) {
              count(stats.calls_skipped, 'duplicate call id');
              break;
            }
            state.callIds.add(record.id);
            state.seenCalls++;
            if (record.seq < state.maxSeq) count(stats.notes, 'out-of-order seq (sorted)');
            if (state.seqs.has(record.seq)) count(stats.notes, 'duplicate seq (arrival order kept)');
            state.seqs.add(record.seq);
            state.maxSeq = Math.max(state.maxSeq, record.seq);
            if (record.api === 'anthropic-count-tokens' || record.api === 'models') {
              count(stats.calls_skipped, 'not a sampling call');
            } else if (record.error !== null) {
              count(stats.calls_skipped, 'call error');
            } else if (record.prompt_token_ids === null || record.completion_token_ids === null) {
              count(stats.calls_skipped, 'no token ids');
              state.textOnly++;
            } else {
              state.calls.push(toMergeCall(record));
            }
            break;
          }
          case 'session_end': {
            const state = open.get(record.session);
            if (state === undefined) {
              count(
                stats.notes,
                built.has(record.session) ? 'repeated session_end' : 'session_end for unknown session',
              );
              break;
            }
            await finish(state, record);
            break;
          }
          case 'grading': {
            const target = open.get(record.session) ?? built.get(record.session);
            if (target === undefined) {
              count(stats.notes, 'grading for unknown session');
              break;
            }
            if (target.grading !== null) count(stats.notes, 'repeated grading (last kept)');
            target.grading = record;
            break;
          }
          default: {
            const never: never = record;
            void never;
          }
        }
      }
      // the input ended: sessions without session_end are built now (status error)
      for (const state of [...open.values()]) await finish(state, null);
    }
    if (sink !== null) await closeStream(sink);
    sink = null;

    // pass 2: rewards, groups, advantages
    const heads = resolveHeads(summaries, {
      rewardTable,
      groupBy,
      advantage,
      dropUniform: options.dropUniformGroups ?? false,
      stats,
    });
    for (let i = 0; i < summaries.length; i++) {
      if (heads[i] === null) continue;
      stats.trajectories_written++;
      stats.traces_written += summaries[i]!.traces;
      stats.tokens_trainable += summaries[i]!.tokensTrainable;
      stats.tokens_total += summaries[i]!.tokensTotal;
    }
    if (options.output !== null && tmp !== null) {
      // the tails were written back to back; read each by its byte length, unparsed and undecoded
      const fh = await openFile(join(tmp, 'tails.jsonl'), 'r');
      try {
        let position = 0;
        for (let i = 0; i < summaries.length; i++) {
          const head = heads[i];
          const rows = summaries[i]!.rowBytes;
          for (let row = 0; row < rows.length; row++) {
            const length = rows[row]!;
            if (head) {
              const buffer = Buffer.allocUnsafe(length);
              let got = 0;
              while (got < length) {
                const { bytesRead } = await fh.read(buffer, got, length - got, position + got);
                if (bytesRead === 0) throw new Error('temporary trajectory file ended early');
                got += bytesRead;
              }
              await write(options.output, encodeHead(format, head, row));
              await write(options.output, buffer);
            }
            position += length;
          }
        }
      } finally {
        await fh.close();
      }
    }
    return stats;
  } finally {
    if (sink !== null) await closeStream(sink).catch(() => undefined);
    if (tmp !== null) await rm(tmp, { recursive: true, force: true });
  }
}

interface ResolveContext {
  rewardTable: RewardTable | null;
  groupBy: string;
  advantage: AdvantageKind;
  dropUniform: boolean;
  stats: BuildStats;
}

/** Rewards, groups and advantages from the summaries; null for a trajectory dropped with its group. */
function resolveHeads(summaries: readonly Summary[], ctx: ResolveContext): (TrajectoryHead | null)[] {
  const { stats } = ctx;
  const heads: (TrajectoryHead | null)[] = summaries.map((s) => {
    const g = s.grading;
    const taskId = s.taskId ?? g?.task_id ?? null;
    const sample = s.sample ?? g?.sample ?? null;
    const fromFile = ctx.rewardTable ? lookupReward(ctx.rewardTable, s.session, taskId, sample) : undefined;
    let reward: number | null = null;
    if (g !== null) {
      reward = g.reward;
      stats.rewards.capture++;
      if (fromFile !== undefined && fromFile !== g.reward)
        count(stats.notes, 'reward conflict (capture kept)');
    } else if (fromFile !== undefined) {
      reward = fromFile;
      stats.rewards.file++;
    } else stats.rewards.missing++;
    return {
      id: s.session,
      session: s.session,
      task_id: taskId,
      sample,
      group_id: null,
      harness: s.harness,
      model: s.model,
      status: s.status,
      reward,
      advantage: null,
    };
  });

  const groups = new Map<string, number[]>();
  summaries.forEach((s, i) => {
    const key = groupKey(ctx.groupBy, { ...s, taskId: heads[i]!.task_id });
    if (key === null) {
      if (ctx.groupBy !== 'none') count(stats.notes, `no group (${ctx.groupBy} missing)`);
      return;
    }
    heads[i]!.group_id = key;
    const members = groups.get(key);
    if (members) members.push(i);
    else groups.set(key, [i]);
  });
  stats.groups = groups.size;
  for (const members of groups.values()) {
    const rewards = members.map((i) => heads[i]!.reward);
    if (rewards.some((r) => r === null)) {
      stats.groups_without_reward++;
      continue;
    }
    const values = rewards as number[];
    if (ctx.dropUniform && isUniform(values)) {
      stats.groups_dropped_uniform++;
      count(stats.sessions_skipped, 'group with uniform rewards (--drop-uniform-groups)', members.length);
      for (const i of members) heads[i] = null;
      continue;
    }
    const adv = groupAdvantages(values, ctx.advantage);
    members.forEach((i, k) => {
      heads[i]!.advantage = adv[k]!;
    });
  }
  return heads;
}
