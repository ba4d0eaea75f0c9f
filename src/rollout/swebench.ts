/**
 * --grader swebench: the official harness grades the predictions polar's agents produced
 * (`python -m swebench.harness.run_evaluation`, docker required), then polar reads its report
 * (`<model>.<run_id>.json` with resolved_ids / unresolved_ids / empty_patch_ids / error_ids).
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { EnvironmentError } from '../errors.ts';
import { writeAtomic } from '../util/private-files.ts';
import type { Agent } from './agents.ts';
import type { SweInstance } from './dataset.ts';
import { execTree } from './exec.ts';
import type { GradeStatus } from './grade.ts';
import { isInfraFailure } from './outcome.ts';
import { EVAL_FILES, samplePredictionsFile } from './run/files.ts';
import type { EvalOutcome } from './run/run.ts';
import { writeReport } from './run/run.ts';
import type { Runtime } from './runtime/types.ts';

/**
 * The harness's command line (SWE-bench/SWE-bench v4.1.0 swebench/harness/run_evaluation.py argparse:
 * --dataset_name, --split, --predictions_path, --max_workers, --timeout in whole seconds, --run_id,
 * --instance_ids). It runs with --out as its working directory, so a local dataset file is passed as
 * an absolute path; a hub id is passed as it is.
 */
export function swebenchArgs(
  dataset: string,
  predictions: string,
  runId: string,
  workers: number,
  ids: string[],
  options: { split?: string; testTimeoutMs?: number; cwd?: string } = {},
): string[] {
  const local = existsSync(resolve(options.cwd ?? '.', dataset));
  return [
    '-m',
    'swebench.harness.run_evaluation',
    '--dataset_name',
    local ? resolve(options.cwd ?? '.', dataset) : dataset,
    ...(options.split ? ['--split', options.split] : []),
    '--predictions_path',
    predictions,
    '--max_workers',
    String(workers),
    ...(options.testTimeoutMs
      ? ['--timeout', String(Math.max(1, Math.ceil(options.testTimeoutMs / 1000)))]
      : []),
    '--run_id',
    runId,
    '--instance_ids',
    ...ids,
  ];
}

export async function runSwebenchGrader(
  outcome: EvalOutcome,
  context: {
    out: string;
    dataset: string;
    /** split of a hub dataset, passed on as --split */
    split?: string;
    /** per-instance test timeout, passed on as --timeout */
    testTimeoutMs?: number;
    concurrency: number;
    instances: SweInstance[];
    agent: Agent;
    runtime: Runtime;
    samples: number;
  },
): Promise<EvalOutcome> {
  const python = process.env.POLAR_PYTHON ?? 'python3';
  const probe = await execTree(python, ['-c', 'import swebench, sys; print(swebench.__version__)'], {
    timeoutMs: 60_000,
  });
  if (probe.exitCode !== 0) {
    throw new EnvironmentError(
      '--grader swebench: the swebench package is not installed',
      `install it (pip install swebench) for ${python}, or use --grader polar`,
    );
  }
  const out = resolve(context.out);
  const results = outcome.results.map((r) => ({ ...r }));
  for (let j = 0; j < context.samples; j++) {
    const predictions =
      context.samples > 1
        ? join(out, EVAL_FILES.predictionsDir, samplePredictionsFile(j))
        : join(out, EVAL_FILES.predictions);
    // a fresh run id per run: the harness silently reuses cached results for a known run_id
    const runId = `polar-${Date.now().toString(36)}-s${j}`;
    const ids = results.filter((r) => r.sample === j).map((r) => r.instance_id);
    const run = await execTree(
      python,
      swebenchArgs(context.dataset, predictions, runId, context.concurrency, ids, {
        split: context.split,
        testTimeoutMs: context.testTimeoutMs,
      }),
      { cwd: out },
    );
    const reportPath = join(out, `${context.agent.modelName.replaceAll('/', '__')}.${runId}.json`);
    if (run.exitCode !== 0 || !existsSync(reportPath)) {
      throw new EnvironmentError(
        `swebench.harness.run_evaluation failed (exit ${run.exitCode}): ${run.output.trim().split('\n').slice(-3).join(' | ')}`,
      );
    }
    const official = JSON.parse(await readFile(reportPath, 'utf8')) as Record<string, string[] | undefined>;
    const statusOf = (id: string): GradeStatus =>
      official.resolved_ids?.includes(id)
        ? 'resolved'
        : official.empty_patch_ids?.includes(id)
          ? 'empty_patch'
          : official.error_ids?.includes(id)
            ? 'error'
            : 'unresolved';
    for (const r of results.filter((x) => x.sample === j)) {
      // polar's own `error` (the harness got no model answer, the environment failed) stays an error:
      // an official grade of its empty patch would turn an infrastructure failure into a reward
      if (isInfraFailure(r)) continue;
      r.status = statusOf(r.instance_id);
      r.resolved = r.status === 'resolved';
      r.reward = r.status === 'error' ? null : r.resolved ? 1 : 0;
      r.reason = r.resolved ? null : `swebench: ${r.status}`;
      r.grader = 'swebench';
    }
  }
  await writeAtomic(join(out, EVAL_FILES.results), results.map((r) => `${JSON.stringify(r)}\n`).join(''));
  const report = await writeReport(out, results, context);
  return { ...outcome, report, results };
}
