/**
 * What a loop step shows while the run goes: its rollout health (src/loop/health.ts) on stderr with
 * plain-word warnings, and, with --report-to, its figures in the run's one tracking writer
 * (src/train/tracking/reporter.ts): the trainer's steps (train/..., forwarded from the worker's events), the
 * rollouts' figures (rollout/...), the health (health/...) and the held-out evaluations (heldout/...),
 * each at its step. src/loop/loop.ts and src/loop/async-loop.ts call these at a few places; the figures
 * themselves are src/train/tracking/figures.ts and src/rollout/run/figures.ts.
 */

import type { ReportSetup } from '../options/report.ts';
import { evalFigures } from '../rollout/run/figures.ts';
import type { ResultLine } from '../rollout/run/report.ts';
import type { EvalOutcome } from '../rollout/run/run.ts';
import { buildFigures, trainFigures } from '../train/tracking/figures.ts';
import { openReporter, type Reporter } from '../train/tracking/reporter.ts';
import type { BuildStats } from '../trajectory/stats.ts';
import { log } from '../util/log.ts';
import { formatHealth, healthFigures, recordFigure, type StepHealth, stepHealth } from './health.ts';

/**
 * The loop's writer: none without --report-to. A resumed loop continues the W&B run of tracking.json, and
 * TensorBoard drops what a cut-short process logged from the first step it redoes on (the loop trains one
 * trainer step per loop step, so the trainer's steps and the loop's have the same numbers).
 */
export function openLoopReporter(
  report: ReportSetup | null | undefined,
  o: { out: string; resume: boolean; first: number; config: Record<string, unknown> },
): Promise<Reporter> {
  return openReporter(report ?? null, {
    out: o.out,
    resume: o.resume,
    purgeStep: o.first,
    config: { command: 'loop', ...o.config },
  });
}

/** The trainer's step events into the writer (runTrain's onStep). */
export function trainSteps(reporter: Reporter): (event: Record<string, unknown>) => void {
  return (event) => reporter.log('train', Number(event.step), trainFigures(event));
}

/**
 * Step n's health from its results and build report (and the step record's own fields: overlong,
 * staleness), printed with its warnings, and every figure of the step logged: rollouts, build, health,
 * the held-out evaluation when there was one.
 */
export function observeStep(
  reporter: Reporter,
  n: number,
  step: {
    record: Record<string, unknown>;
    rollouts: EvalOutcome;
    stats: BuildStats;
    heldout: EvalOutcome | null;
    /** the GRPO group of a result (the asynchronous loop's batch); default its task */
    groupOf?: (r: ResultLine) => string;
  },
): StepHealth {
  const health = stepHealth({
    results: step.rollouts.results,
    stats: step.stats,
    record: step.record,
    ...(step.groupOf ? { groupOf: step.groupOf } : {}),
  });
  log.info(`step ${n} health: ${formatHealth(health)}`);
  for (const warning of health.warnings) log.warn(`step ${n}: ${warning}`);
  const staleness = recordFigure(step.record, 'staleness');
  reporter.log('loop', n, {
    ...evalFigures('rollout', step.rollouts.report, step.rollouts.results),
    ...buildFigures(step.stats),
    ...healthFigures(health),
    ...(staleness !== null ? { 'rollout/staleness': staleness } : {}),
    ...(step.heldout ? evalFigures('heldout', step.heldout.report, step.heldout.results) : {}),
  });
  return health;
}

/** The starting policy's held-out evaluation (step-0/heldout): the baseline, at loop step 0. */
export function observeBaseline(reporter: Reporter, heldout: EvalOutcome): void {
  reporter.log('loop', 0, evalFigures('heldout', heldout.report, heldout.results));
}
