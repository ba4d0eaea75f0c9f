/**
 * Rollout health, computed every loop step from what the step already wrote (its graded results and
 * polar build's report): the share of GRPO groups with no learning signal (every reward equal), the rate
 * of model calls whose token ids are not exact (drift, by cause), truncated traces, failed model calls,
 * infrastructure errors, tool calls the server did not parse, and, when the step record carries them,
 * overlong counts and staleness. Pure functions: src/loop/loop.ts writes the result into step.json
 * (`health`), prints it with plain-word warnings past HEALTH_THRESHOLDS, and logs it to --report-to;
 * `polar inspect` shows it. docs/loop.md, "Rollout health".
 */
import { z } from 'zod';
import { describeFinding } from '../rollout/integrity/findings.ts';
import type { ResultLine } from '../rollout/run/report.ts';
import { tag } from '../train/tracking/figures.ts';
import type { BuildStats } from '../trajectory/stats.ts';
import { plural } from '../util/plural.ts';

/** Past these a step's health line carries a warning. */
export const HEALTH_THRESHOLDS = {
  /** share of groups whose rewards are all equal (no advantage, nothing learnt from them) */
  noSignalShare: 0.5,
  /** share of model calls used although their token ids are not exact */
  driftRate: 0.05,
  /** share of traces cut */
  truncatedShare: 0.1,
  /** share of model calls that failed */
  failedCallRate: 0.05,
} as const;

const rate = z.number().min(0).max(1).nullable();
const count = z.number().int().nonnegative();

/** step.json's `health` (stepSummarySchema, src/loop/files.ts). */
export const stepHealthSchema = z.looseObject({
  /** groups (tasks) with at least one rewarded sample */
  groups: count,
  /** of those, the ones whose rewards are all equal; split into all solved / all failed */
  groups_no_signal: count,
  groups_all_solved: count,
  groups_all_failed: count,
  no_signal_share: rate,
  /** model calls in the built traces, and those used although not token-exact (by cause) */
  calls: count,
  calls_inexact: count,
  drift_rate: rate,
  drift_by_cause: z.record(z.string(), count),
  traces: count,
  truncated_traces: count,
  truncated_by_cause: z.record(z.string(), count),
  truncated_share: rate,
  /** the harnesses' model calls, and those that got no answer */
  model_calls: count,
  failed_calls: count,
  failed_call_rate: rate,
  samples: count,
  /** samples that ended in an infrastructure error (no reward) */
  infra_errors: count,
  /** model calls whose text holds a tool call the server did not parse (tool_call_unparsed) */
  tool_calls_unparsed: count,
  /**
   * samples the grading integrity layers flagged (docs/eval.md, "Grading integrity"), those whose run
   * was proven tampered with, and the first FLAGGED_SHOWN of them with their evidence (absent in older
   * step.json)
   */
  flagged: count.optional(),
  tampering_proven: count.optional(),
  flagged_samples: z
    .array(
      z.object({
        instance_id: z.string(),
        sample: z.number().int().nonnegative(),
        proven: z.boolean(),
        rejected: z.boolean(),
        evidence: z.array(z.string()),
      }),
    )
    .optional(),
  /** copied from the step record when present (dynamic sampling, the async loop) */
  overlong: z.number().nonnegative().nullable().optional(),
  staleness: z.number().nonnegative().nullable().optional(),
  warnings: z.array(z.string()),
});
export type StepHealth = z.infer<typeof stepHealthSchema>;

/** flagged samples a step's health lists with their evidence (all are counted) */
export const FLAGGED_SHOWN = 20;

/** the flagged samples of a step, each with its findings in one line each */
function flaggedSamples(results: readonly ResultLine[]): NonNullable<StepHealth['flagged_samples']> {
  return results
    .filter((r) => r.tampering)
    .slice(0, FLAGGED_SHOWN)
    .map((r) => ({
      instance_id: r.instance_id,
      sample: r.sample,
      proven: Boolean(r.tampering!.proven),
      rejected: r.tampering!.rejected,
      evidence: (r.tampering!.findings ?? [{ layer: 'test-surface' as const, reason: r.tampering!.reason }])
        .slice(0, 6)
        .map((f) => `${f.proof ? 'proof' : f.layer}: ${describeFinding(f)}`),
    }));
}

const sum = (r: Record<string, number>): number => Object.values(r).reduce((a, b) => a + b, 0);
const share = (a: number, b: number): number | null => (b > 0 ? a / b : null);
const pct = (x: number | null): string => (x === null ? 'n/a' : `${Math.round(x * 100)}%`);

/**
 * A number from the step record's field `key` when another part of the loop put one there: a number
 * itself, or an object's `count`/`total`/`mean`/`max` (the first present). Absent or anything else: null.
 */
export function recordFigure(record: Record<string, unknown> | undefined, key: string): number | null {
  const v = record?.[key];
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    for (const k of ['count', 'total', 'mean', 'max']) {
      const n = (v as Record<string, unknown>)[k];
      if (typeof n === 'number' && Number.isFinite(n)) return n;
    }
  }
  return null;
}

/** The step's health from its graded results, its build report and (optionally) its step record. */
export function stepHealth(input: {
  results: readonly ResultLine[];
  stats: BuildStats;
  /** the step record as far as it is known (overlong, staleness: read when present) */
  record?: Record<string, unknown>;
  /**
   * the GRPO group of a result; default its task (one group per task). The asynchronous loop's batch can
   * hold two groups of one task (a carried group and a fresh one), each its own group.
   */
  groupOf?: (r: ResultLine) => string;
}): StepHealth {
  const { results, stats } = input;
  const groupOf = input.groupOf ?? ((r: ResultLine) => r.instance_id);
  const byTask = new Map<string, number[]>();
  for (const r of results) {
    if (r.reward === null) continue;
    const key = groupOf(r);
    const list = byTask.get(key) ?? [];
    list.push(r.reward);
    byTask.set(key, list);
  }
  let noSignal = 0;
  let allSolved = 0;
  let allFailed = 0;
  for (const rewards of byTask.values()) {
    if (!rewards.every((x) => x === rewards[0])) continue;
    noSignal++;
    if (rewards[0]! >= 1) allSolved++;
    else if (rewards[0]! <= 0) allFailed++;
  }
  let modelCalls = 0;
  let failedCalls = 0;
  for (const r of results) {
    const agent = (r as { agent?: { calls?: unknown; failed_calls?: unknown } }).agent;
    if (typeof agent?.calls === 'number') modelCalls += agent.calls;
    if (typeof agent?.failed_calls === 'number') failedCalls += agent.failed_calls;
  }
  const inexact = sum(stats.calls_inexact);
  const truncated = sum(stats.truncations);
  const overlong = recordFigure(input.record, 'overlong');
  const staleness = recordFigure(input.record, 'staleness');
  const health: StepHealth = {
    groups: byTask.size,
    groups_no_signal: noSignal,
    groups_all_solved: allSolved,
    groups_all_failed: allFailed,
    no_signal_share: share(noSignal, byTask.size),
    calls: stats.calls_used,
    calls_inexact: inexact,
    drift_rate: share(inexact, stats.calls_used),
    drift_by_cause: { ...stats.calls_inexact },
    traces: stats.traces_written,
    truncated_traces: truncated,
    truncated_by_cause: { ...stats.truncations },
    truncated_share: share(truncated, stats.traces_written),
    model_calls: modelCalls,
    failed_calls: failedCalls,
    failed_call_rate: share(failedCalls, modelCalls),
    samples: results.length,
    infra_errors: results.filter((r) => r.status === 'error').length,
    tool_calls_unparsed: stats.calls_tool_unparsed,
    flagged: results.filter((r) => r.tampering).length,
    tampering_proven: results.filter((r) => r.tampering?.proven).length,
    flagged_samples: flaggedSamples(results),
    ...(overlong !== null ? { overlong } : {}),
    ...(staleness !== null ? { staleness } : {}),
    warnings: [],
  };
  health.warnings = healthWarnings(health);
  return health;
}

const causes = (r: Record<string, number>): string =>
  Object.entries(r)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');

/** The plain-word warnings of a step's health: what is wrong, and what to do about it. */
export function healthWarnings(h: StepHealth): string[] {
  const out: string[] = [];
  const t = HEALTH_THRESHOLDS;
  if (h.no_signal_share !== null && h.no_signal_share >= t.noSignalShare) {
    const fix =
      h.groups_all_solved > h.groups_all_failed
        ? 'raise --group-size or pick harder tasks'
        : h.groups_all_failed > h.groups_all_solved
          ? 'raise --group-size or pick easier tasks'
          : 'raise --group-size or pick tasks of another difficulty';
    out.push(
      `${pct(h.no_signal_share)} of groups have equal rewards (${h.groups_all_solved} all solved, ${h.groups_all_failed} all failed): ${fix}`,
    );
  }
  if (h.drift_rate !== null && h.drift_rate > t.driftRate)
    out.push(
      `${pct(h.drift_rate)} of model calls are not token-exact (${causes(h.drift_by_cause)}): the trainer sees other tokens than the server sampled; check the server's token ids (docs/backends.md)`,
    );
  if (h.truncated_share !== null && h.truncated_share > t.truncatedShare)
    out.push(
      `${pct(h.truncated_share)} of traces were truncated (${causes(h.truncated_by_cause)}): raise the trace limit or lower the harness's max tokens`,
    );
  if (h.failed_call_rate !== null && h.failed_call_rate > t.failedCallRate)
    out.push(
      `${pct(h.failed_call_rate)} of model calls failed (${h.failed_calls} of ${h.model_calls}): check the inference server (its log, its load, --backend-timeout)`,
    );
  if (h.infra_errors > 0)
    out.push(
      `${plural(h.infra_errors, 'sample')} ended in an infrastructure error and got no reward: see the step's report.json (eval/, or each group's under groups/)`,
    );
  if (h.flagged)
    out.push(
      `${plural(h.flagged, 'sample')} flagged by the grading integrity layers${h.tampering_proven ? ` (${h.tampering_proven} proven tampered with)` : ''}: graded 0 unless --no-reject-test-tampering; the evidence is in the step's results.jsonl (\`tampering\`) and polar inspect`,
    );
  if (h.tool_calls_unparsed > 0)
    out.push(
      `${plural(h.tool_calls_unparsed, 'model call')} held a tool call the server did not parse: check its tool-call parser (vLLM: --enable-auto-tool-choice --tool-call-parser)`,
    );
  return out;
}

/** The step's health in one line (stderr). */
export function formatHealth(h: StepHealth): string {
  return [
    `equal-reward groups ${pct(h.no_signal_share)} (${h.groups_no_signal}/${h.groups})`,
    `token drift ${pct(h.drift_rate)}`,
    `truncated traces ${h.truncated_traces}`,
    `failed calls ${pct(h.failed_call_rate)}`,
    `infra errors ${h.infra_errors}`,
    `unparsed tool calls ${h.tool_calls_unparsed}`,
    ...(h.flagged
      ? [`flagged ${h.flagged}${h.tampering_proven ? ` (${h.tampering_proven} proven)` : ''}`]
      : []),
    ...(h.overlong !== undefined && h.overlong !== null ? [`overlong ${h.overlong}`] : []),
    ...(h.staleness !== undefined && h.staleness !== null ? [`staleness ${h.staleness}`] : []),
  ].join(', ');
}

/** The health figures as tracker scalars (health/...). */
export function healthFigures(h: StepHealth): Record<string, number | null> {
  const out: Record<string, number | null> = {
    'health/no_signal_share': h.no_signal_share,
    'health/groups_no_signal': h.groups_no_signal,
    'health/token_drift_rate': h.drift_rate,
    'health/truncated_traces': h.truncated_traces,
    'health/failed_call_rate': h.failed_call_rate,
    'health/infra_errors': h.infra_errors,
    'health/tool_calls_unparsed': h.tool_calls_unparsed,
    'health/flagged': h.flagged ?? null,
    'health/tampering_proven': h.tampering_proven ?? null,
    'health/overlong': h.overlong ?? null,
    'health/staleness': h.staleness ?? null,
  };
  for (const [cause, n] of Object.entries(h.drift_by_cause)) out[`health/drift/${tag(cause)}`] = n;
  for (const [cause, n] of Object.entries(h.truncated_by_cause)) out[`health/truncated/${tag(cause)}`] = n;
  return out;
}
