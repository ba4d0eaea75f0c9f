/**
 * What --report-to logs, as tracker scalars (`group/name`): the trainer's step event (train/...) and a
 * loop step's build figures; an evaluation's figures (eval/..., rollout/..., heldout/...) are made from its
 * report by src/rollout/run/figures.ts. Pure functions over records polar already writes
 * (metrics.jsonl, results.jsonl, report.json, build-stats.json), so every logged value can be checked
 * against its file. docs/train.md, "Watching a run", lists them.
 */

import type { BuildStats } from '../../trajectory/stats.ts';
import { STEP_METRICS } from '../schema.ts';

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

/** A reason as a tag part: lowercase words joined by _ (TensorBoard and W&B keys). */
export function tag(text: string): string {
  return (
    text
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '') || 'other'
  );
}
