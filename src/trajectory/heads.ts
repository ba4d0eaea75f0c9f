/**
 * Pass 2 of `polar build`: rewards (capture grading records, then --rewards) and groups, computed from
 * the compact summaries of the built sessions. Advantages are the trainer's (`polar train --advantage`,
 * docs/train.md): the build counts the groups from which no estimator learns anything (uniform rewards).
 */
import type { GradingRecord } from '../capture/record.ts';
import type { GroupBy, OverlongMode, UnparsedToolCallMode } from '../options/defaults.ts';
import type { TrajectoryHead } from './formats.ts';
import { overlongPenalty } from './overlong.ts';
import type { TrajectoryRecord } from './record.ts';
import { isUniform, lookupReward, type RewardTable } from './rewards.ts';
import { type BuildStats, count } from './stats.ts';

/** What the build keeps in memory of one built session. */
export interface Summary {
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
  /** calls in its traces whose tool call the server did not parse */
  unparsedCalls: number;
  /** its traces that a length limit cut (overlong.ts isOverlong) */
  overlongTraces: number;
  /** the least headroom of its traces (overlong.ts), null when no limit is known */
  headroom: number | null;
  /** the oldest policy version of its sampled calls (polar loop), null when none is recorded */
  policyVersion: number | null;
}

/** --group-by's value (declared with the flags' defaults, src/options/defaults.ts). */
export type { GroupBy };

export interface ResolveContext {
  rewardTable: RewardTable | null;
  groupBy: GroupBy;
  dropUniform: boolean;
  /** zero: a trajectory with an unparsed tool call gets reward 0 (before groups and advantages) */
  unparsed: UnparsedToolCallMode;
  /** --overlong and --overlong-buffer: recorded in each head; penalty counts in the group's rewards */
  overlong: { mode: OverlongMode; buffer: number };
  stats: BuildStats;
}

function groupKey(groupBy: GroupBy, s: Summary): string | null {
  if (groupBy === 'none') return null;
  if (groupBy === 'task_id') return s.taskId;
  return s.metaGroup;
}

/** The head of one summary: its reward from the capture (kept on conflict) or the rewards file. */
function headOf(s: Summary, ctx: ResolveContext): TrajectoryHead {
  const { stats } = ctx;
  const g = s.grading;
  const taskId = s.taskId ?? g?.task_id ?? null;
  const sample = s.sample ?? g?.sample ?? null;
  const fromFile = ctx.rewardTable ? lookupReward(ctx.rewardTable, s.session, taskId, sample) : undefined;
  let reward: number | null = null;
  if (g !== null) {
    reward = g.reward;
    stats.rewards.capture++;
    if (fromFile !== undefined && fromFile !== g.reward) count(stats.notes, 'reward conflict (capture kept)');
  } else if (fromFile !== undefined) {
    reward = fromFile;
    stats.rewards.file++;
  } else stats.rewards.missing++;
  if (s.unparsedCalls > 0 && ctx.unparsed === 'zero' && reward !== null) {
    reward = 0;
    stats.rewards_zeroed_unparsed++;
  }
  const penalty = ctx.overlong.mode === 'penalty' ? overlongPenalty(s.headroom, ctx.overlong.buffer) : 0;
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
    // only where the trainer has something to apply it to: a cut trace, or a known limit
    ...(s.overlongTraces > 0 || s.headroom !== null ? { overlong: ctx.overlong } : {}),
    // 0 unless --overlong penalty; -0 would print as 0 anyway
    lengthPenalty: penalty === 0 ? 0 : penalty,
    ...(s.policyVersion !== null ? { policy_version: s.policyVersion } : {}),
  };
}

/** The reward the trainer learns from: with --overlong penalty, DAPO's length penalty added. */
export function effectiveReward(head: TrajectoryHead): number | null {
  return head.reward === null ? null : head.reward + head.lengthPenalty;
}

/** Rewards and groups from the summaries; null for a trajectory dropped with its group. */
export function resolveHeads(summaries: readonly Summary[], ctx: ResolveContext): (TrajectoryHead | null)[] {
  const { stats } = ctx;
  const heads: (TrajectoryHead | null)[] = summaries.map((s) => headOf(s, ctx));
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
    const rewards = members.map((i) => effectiveReward(heads[i]!));
    if (rewards.some((r) => r === null)) {
      stats.groups_without_reward++;
      continue;
    }
    const values = rewards as number[];
    const uniform = isUniform(values);
    if (ctx.dropUniform && uniform) {
      stats.groups_dropped_uniform++;
      count(stats.sessions_skipped, 'group with uniform rewards (--drop-uniform-groups)', members.length);
      for (const i of members) heads[i] = null;
      continue;
    }
    if (members.length === 1) stats.groups_single++;
    if (uniform) stats.groups_uniform++;
  }
  return heads;
}
