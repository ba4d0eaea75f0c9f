/**
 * /aggregate_metrics: the statistics NeMo Gym's default aggregation computes (nemo_gym/reward_profile.py,
 * `compute_aggregate_metrics` over `RewardProfiler.profile_from_data`; reference only): every numeric
 * (or boolean, as 0/1) top-level field of the stripped verify responses, plus `response.usage`'s numeric
 * fields, described per task (`group_level_metrics`, one entry per `_ng_task_index`) and over all
 * rollouts (`agent_metrics`) as `mean/<field>`, `max/`, `min/`, `median/`, `std/` (sample standard
 * deviation; 0 for a single value, as RewardProfiler fills it). `key_metrics` are the `mean/` entries,
 * the default `get_key_metrics`. polar adds `pass@1` (mean resolved rate) and `pass@k/<k>` (unbiased,
 * over the rollouts of each task) to agent_metrics.
 */
import { type AggregateMetrics, ROLLOUT_INDEX_KEY, TASK_INDEX_KEY } from './contract.ts';
import { FAILURE_CLASS_KEY } from './failure.ts';

type Row = Record<string, unknown>;

function numericFields(row: Row): Record<string, number> {
  const out: Record<string, number> = {};
  const usage = (row.response as { usage?: Row } | undefined)?.usage;
  for (const source of [usage ?? {}, row]) {
    for (const [k, v] of Object.entries(source)) {
      if (k === TASK_INDEX_KEY || k === ROLLOUT_INDEX_KEY || k === 'response') continue;
      if (typeof v === 'boolean') out[k] = v ? 1 : 0;
      else if (typeof v === 'number' && Number.isFinite(v)) out[k] = v;
    }
  }
  return out;
}

function describe(rows: Record<string, number>[]): Record<string, number> {
  const columns = new Set(rows.flatMap((r) => Object.keys(r)));
  const out: Record<string, number> = {};
  for (const column of [...columns].sort()) {
    const values = rows.map((r) => r[column]).filter((v): v is number => v !== undefined);
    if (values.length === 0) continue;
    const sorted = [...values].sort((a, b) => a - b);
    const mean = values.reduce((s, v) => s + v, 0) / values.length;
    const mid = sorted.length >> 1;
    const median = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
    const std =
      values.length > 1
        ? Math.sqrt(values.reduce((s, v) => s + (v - mean) ** 2, 0) / (values.length - 1))
        : 0;
    out[`mean/${column}`] = mean;
    out[`max/${column}`] = sorted[sorted.length - 1]!;
    out[`min/${column}`] = sorted[0]!;
    out[`median/${column}`] = median;
    out[`std/${column}`] = std;
  }
  return out;
}

/** Unbiased pass@k for n samples with c correct (Chen et al. 2021). */
export function passAtK(n: number, c: number, k: number): number {
  if (n - c < k) return 1;
  let fail = 1;
  for (let i = n - c + 1; i <= n; i++) fail *= 1 - k / i;
  return 1 - fail;
}

export function aggregateMetrics(given: readonly Row[]): AggregateMetrics {
  // failed rollouts (`_ng_failure_class`, reward null) are no score: NeMo Gym keeps them out of the file
  // it aggregates (nemo_gym/rollout_collection.py); a caller that sends them gets them counted apart
  const verifyResponses = given.filter(
    (r) => r[FAILURE_CLASS_KEY] === undefined || r[FAILURE_CLASS_KEY] === null,
  );
  const failed = given.length - verifyResponses.length;
  if (verifyResponses.length === 0)
    return {
      group_level_metrics: [],
      agent_metrics: failed ? { polar_failed_rollouts: failed } : {},
      key_metrics: {},
    };
  const byTask = new Map<number, Row[]>();
  for (const r of verifyResponses) {
    const task = typeof r[TASK_INDEX_KEY] === 'number' ? (r[TASK_INDEX_KEY] as number) : 0;
    const list = byTask.get(task) ?? [];
    list.push(r);
    byTask.set(task, list);
  }
  const group_level_metrics = [...byTask.entries()]
    .sort(([a], [b]) => a - b)
    .map(([task, rows]) => ({
      [TASK_INDEX_KEY]: task,
      ...describe(rows.map(numericFields)),
      num_rollouts: rows.length,
    }));
  const agent_metrics: Record<string, unknown> = describe(verifyResponses.map(numericFields));
  const resolved = (r: Row) => (typeof r.reward === 'number' && r.reward >= 1) || r.resolved === true;
  agent_metrics['pass@1'] = verifyResponses.filter(resolved).length / verifyResponses.length;
  const minRollouts = Math.min(...[...byTask.values()].map((rows) => rows.length));
  for (let k = 2; k <= minRollouts; k *= 2) {
    const rates = [...byTask.values()].map((rows) => passAtK(rows.length, rows.filter(resolved).length, k));
    agent_metrics[`pass@${k}`] = rates.reduce((s, v) => s + v, 0) / rates.length;
  }
  if (failed) agent_metrics.polar_failed_rollouts = failed;
  const key_metrics = Object.fromEntries(
    Object.entries(agent_metrics).filter(([k]) => k.startsWith('mean/')),
  );
  return { group_level_metrics, agent_metrics, key_metrics };
}
