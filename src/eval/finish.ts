/** The end of a `polar eval` run: its report printed, its exit code (interrupted, all errors, --fail-under). */
import { resolve } from 'node:path';
import { EXIT, PolarError } from '../errors.ts';
import { formatReport } from '../rollout/run/report.ts';
import type { EvalOutcome } from '../rollout/run/run.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import type { EvalFlags } from './flags.ts';

/** The report printed, the run's exit code (errors, --fail-under). */
export function finish(
  f: Pick<EvalFlags, 'json' | 'out' | 'failUnder'>,
  outcome: EvalOutcome,
  /** 128 + the stopping signal's number (0: none came) */
  stoppedCode = 0,
): number {
  const { report } = outcome;
  if (f.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else process.stdout.write(`${formatReport(report)}\n`);
  log.info(`wrote ${resolve(f.out)}/{results.jsonl,predictions.jsonl,report.json}`);
  if (outcome.interrupted) return stoppedCode || EXIT.interrupted;
  if (report.total > 0 && report.counts.error === report.total) {
    throw new PolarError(`the evaluation failed: all ${plural(report.total, 'sample')} ended in an error`, {
      exitCode: EXIT.failure,
      hint: `first error: ${report.errors[0]?.reason ?? Object.values(report.excluded?.invalid_environment.environments ?? {})[0] ?? 'unknown'}`,
    });
  }
  if (report.counts.error > 0)
    log.warn(
      `${plural(report.counts.error, 'sample')} ended in an error and ${report.counts.error === 1 ? 'has' : 'have'} no reward (see report.json; --resume runs them again)`,
    );
  const mean = report.pass_at_1.mean;
  if (f.failUnder !== undefined && (mean === null || mean < f.failUnder)) {
    throw new PolarError(`pass@1 ${mean?.toFixed(4) ?? 'n/a'} is below --fail-under ${f.failUnder}`, {
      exitCode: EXIT.belowThreshold,
    });
  }
  return EXIT.ok;
}
