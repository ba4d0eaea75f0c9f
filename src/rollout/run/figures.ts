/**
 * An evaluation's figures for --report-to (src/train/tracking/): the report and its results under a
 * prefix, eval/... for polar eval, rollout/... and heldout/... in a loop. Pure functions over records the
 * run folder holds (results.jsonl, report.json), so every logged value can be checked against its file.
 * docs/train.md, "Watching a run", lists them.
 */
import { type Figures, quantile } from '../../train/tracking/figures.ts';
import type { Report, ResultLine } from './report.ts';

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
