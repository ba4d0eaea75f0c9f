/**
 * What --report-to logs, as tracker scalars (`group/name`): the trainer's step event (train/...), an
 * evaluation's figures (the report and its results: eval/... for polar eval, rollout/... and heldout/...
 * in a loop), and a loop step's build figures. Pure functions over records polar already writes
 * (metrics.jsonl, results.jsonl, report.json, build-stats.json), so every logged value can be checked
 * against its file. docs/train.md, "Watching a run", lists them.
 */

import { tag } from '../loop/health.ts';
import type { Report, ResultLine } from '../rollout/run/report.ts';
import { STEP_METRICS } from '../train/schema.ts';
import type { BuildStats } from '../trajectory/stats.ts';

export type Figures = Record<string, number | null | undefined>;

/** the step event's counts logged beside STEP_METRICS */
const STEP_COUNTS = ['lr', 'updates', 'rollouts', 'tokens', 'trained_tokens', 'mfu'] as const;

/** The trainer's `step` event (one line of metrics.jsonl) as train/... scalars. */
export function trainFigures(event: Record<string, unknown>): Figures {
  const out: Figures = {};
  for (const key of [...STEP_METRICS, ...STEP_COUNTS]) {
    const v = event[key];
    if (typeof v === 'number') out[`train/${key}`] = v;
  }
  return out;
}

/** The p-th quantile (0..1) of sorted values, nearest rank; null for none. */
export function quantile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[i]!;
}

/** The class of an errored sample: no model answer, a timeout, the environment, or other. */
export function errorClass(line: ResultLine): string {
  const reason = (line.reason ?? '').toLowerCase();
  const agent = (line as { agent?: { status?: unknown } }).agent;
  if (reason.startsWith('no model answer')) return 'no_model_answer';
  if (agent?.status === 'timeout' || reason.includes('timed out') || reason.includes('timeout'))
    return 'timeout';
  if (reason.includes('environment') || reason.includes('install')) return 'environment';
  return 'other';
}

/** An evaluation's figures under `prefix` (eval, rollout, heldout): its report and its results. */
export function evalFigures(prefix: string, report: Report, results: readonly ResultLine[]): Figures {
  const out: Figures = {
    [`${prefix}/pass_at_1`]: report.pass_at_1.mean,
    [`${prefix}/pass_at_1_std`]: report.pass_at_1.std,
    [`${prefix}/resolved`]: report.counts.resolved ?? 0,
    [`${prefix}/samples`]: report.total,
    [`${prefix}/suspicious`]: report.suspicious,
  };
  for (const [k, v] of Object.entries(report.pass_at_k)) if (k !== '1') out[`${prefix}/pass_at_${k}`] = v;
  for (const [status, n] of Object.entries(report.counts)) out[`${prefix}/status/${status}`] = n;
  const rewards = results.map((r) => r.reward).filter((r): r is number => typeof r === 'number');
  if (rewards.length > 0) {
    const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
    const variance = rewards.reduce((a, b) => a + (b - mean) ** 2, 0) / rewards.length;
    out[`${prefix}/reward_mean`] = mean;
    out[`${prefix}/reward_std`] = Math.sqrt(variance);
  }
  const errors = new Map<string, number>();
  for (const r of results)
    if (r.status === 'error') errors.set(errorClass(r), (errors.get(errorClass(r)) ?? 0) + 1);
  for (const [cls, n] of errors) out[`${prefix}/errors/${cls}`] = n;
  const times = results
    .map((r) => r.durations_ms.total / 1000)
    .filter((t) => Number.isFinite(t))
    .sort((a, b) => a - b);
  out[`${prefix}/sample_time_s_p50`] = quantile(times, 0.5);
  out[`${prefix}/sample_time_s_p90`] = quantile(times, 0.9);
  out[`${prefix}/sample_time_s_max`] = times.at(-1) ?? null;
  const calls = results
    .map((r) => (r as { agent?: { calls?: unknown } }).agent?.calls)
    .filter((c): c is number => typeof c === 'number');
  if (calls.length > 0)
    out[`${prefix}/model_calls_per_rollout`] = calls.reduce((a, b) => a + b, 0) / calls.length;
  return out;
}

/** A loop step's build figures (rollout/...): tokens per rollout, traces, truncations and drift by cause. */
export function buildFigures(stats: BuildStats): Figures {
  const out: Figures = {
    'rollout/trajectories': stats.trajectories_written,
    'rollout/tokens_per_rollout':
      stats.trajectories_written > 0 ? stats.tokens_total / stats.trajectories_written : null,
    'rollout/trainable_tokens': stats.tokens_trainable,
    'rollout/calls_per_rollout':
      stats.trajectories_written > 0 ? stats.calls_used / stats.trajectories_written : null,
    'rollout/truncated_traces': Object.values(stats.truncations).reduce((a, b) => a + b, 0),
  };
  for (const [cause, n] of Object.entries(stats.calls_inexact)) out[`rollout/drift/${tag(cause)}`] = n;
  for (const [status, n] of Object.entries(stats.status)) out[`rollout/session_status/${tag(status)}`] = n;
  return out;
}
