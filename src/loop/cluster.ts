/**
 * `polar loop --cluster ray[=ADDRESS]|slurm`: a step's rollouts (and held-out evals) are a rollout job
 * (src/rollout/executors/job.ts) of that step's tasks with the cluster's executor, run by a child `polar
 * job -` into the step's eval folder, so they fan out through exactly the path `polar eval
 * --cluster` takes (src/rollout/executors/ray.ts, slurm.ts): one Ray task per sample, or Slurm array
 * shards and a merge job. The job is the loop's own evaluation set-up (the harness on the loop's backend,
 * in its runtime, graded as the loop grades), the step's dataset, tasks, samples and folder, and the
 * session meta a local loop records (the policy's step). The loop reads back its report through the
 * report's schema.
 */
import { join } from 'node:path';
import { execa } from 'execa';
import { PolarError, UsageError } from '../errors.ts';
import { DEFAULTS } from '../options/defaults.ts';
import type { ClusterChoice } from '../options/parsers.ts';
import { jobOfSetup, ROLLOUT_JOB_VERSION, type RolloutJob } from '../rollout/executors/job.ts';
import { type ClusterFlags, clusterExecutor } from '../rollout/flags.ts';
import { EVAL_FILES } from '../rollout/run/files.ts';
import { readRunReport } from '../rollout/run/read-report.ts';
import { readResults } from '../rollout/run/results.ts';
import type { EvalOutcome } from '../rollout/run/run.ts';
import type { EvaluationSetup } from '../rollout/setup.ts';
import { POLAR_BIN } from '../train/cluster/polar.ts';
import { throwIfStopped } from '../util/interrupt.ts';
import { log } from '../util/log.ts';
import { LOOP_RESUME_HINT } from './files.ts';

export interface LoopCluster {
  choice: ClusterChoice;
  /** where a step's samples run: the executor of its rollout job (--cluster and its --cluster-* flags) */
  executor: RolloutJob['executor'];
  /** --api-key as given (a key from POLAR_BACKEND_API_KEY stays out of the job: the step's eval reads it) */
  apiKey?: string;
  /** how the step's `polar eval` is started: [node, bin/polar] of this checkout */
  polar: string[];
}

/**
 * The loop's cluster from its flags. Recorded in the loop's config.json as the engine and address only
 * (the rest may hold a server's key). The step's eval is this polar (bin/polar of this checkout, this
 * node binary).
 */
export function loopCluster(f: ClusterFlags & { cluster: ClusterChoice; apiKey?: string }): LoopCluster {
  const choice = f.cluster;
  return {
    choice,
    executor: clusterExecutor(f),
    ...(f.apiKey ? { apiKey: f.apiKey } : {}),
    polar: [process.execPath, POLAR_BIN],
    toJSON: () => ({ engine: choice.engine, ...(choice.address ? { address: choice.address } : {}) }),
  } as LoopCluster;
}

/** How the loop grades and times a sample (its LoopOptions, src/loop/options.ts). */
export interface StepGrading {
  /** a verifier grader command; absent: polar's own grader */
  verifier?: string;
  gradeEmptyPatches?: boolean;
  rejectTestTampering?: boolean;
  agentTimeoutMs: number;
  testTimeoutMs: number;
}

/** What a step asks of its cluster rollouts. */
export interface ClusterRolloutRun {
  instanceIds: string[];
  samples: number;
  out: string;
  dataset: string;
  concurrency: number;
  meta: Record<string, string>;
  quiet: boolean;
  /** continue the folder of an interrupted step (the job's `resume`, as eval --resume) */
  resume?: boolean;
  signal?: AbortSignal;
}

/** The rollout job of a step's rollouts on the cluster: the loop's evaluation (`setup`) of the step's tasks. */
export function stepJob(
  setup: EvaluationSetup,
  o: StepGrading,
  c: LoopCluster,
  run: ClusterRolloutRun,
): RolloutJob {
  if (run.instanceIds.length === 0) throw new UsageError('a step with no tasks has no rollouts to run');
  return {
    v: ROLLOUT_JOB_VERSION,
    dataset: run.dataset,
    split: DEFAULTS.split.value,
    instances: run.instanceIds,
    samples: run.samples,
    setup: jobOfSetup(setup, { ...(c.apiKey ? { apiKey: c.apiKey } : {}) }),
    grader: o.verifier ? { kind: 'verifier', command: o.verifier } : { kind: 'polar' },
    gradeEmpty: Boolean(o.gradeEmptyPatches),
    // the loop's default: a flagged sample graded 0 (its evaluations are for training)
    rejectTampering: o.rejectTestTampering ?? DEFAULTS.trainingRejectsTampering.value,
    agentTimeoutMs: o.agentTimeoutMs,
    testTimeoutMs: o.testTimeoutMs,
    concurrency: run.concurrency,
    out: run.out,
    resume: Boolean(run.resume),
    overwrite: false,
    meta: run.meta,
    executor: c.executor,
  };
}

/** A step's rollouts on the cluster: its job run by a child `polar job -`; its report read back. */
export async function clusterRollouts(
  c: LoopCluster,
  run: ClusterRolloutRun,
  job: RolloutJob,
): Promise<EvalOutcome> {
  const [file, ...pre] = c.polar;
  if (!file) throw new UsageError('--cluster-polar is empty');
  const args = [...pre, 'job', '-', ...(run.quiet ? ['--quiet'] : [])];
  log.info(
    `rollouts on ${c.choice.engine}${c.choice.address ? ` at ${c.choice.address}` : ''}: polar eval --out ${run.out}`,
  );
  const child = execa(file, args, {
    reject: false,
    // the job on stdin: nothing of it (a server URL's credentials) in a file or on the command line
    input: JSON.stringify(job),
    // the eval's progress and warnings are the loop's; its printed report is not needed (report.json is)
    stdout: 'ignore',
    stderr: ['inherit', 'pipe'],
    buffer: { stderr: true },
  });
  const onAbort = () => child.kill('SIGTERM');
  run.signal?.addEventListener('abort', onAbort, { once: true });
  let result: Awaited<typeof child>;
  try {
    result = await child;
  } finally {
    run.signal?.removeEventListener('abort', onAbort);
  }
  throwIfStopped(run.signal, `the rollouts in ${run.out} were stopped`, LOOP_RESUME_HINT);
  if (result.exitCode !== 0) {
    const last = String(result.stderr ?? '')
      .trim()
      .split('\n')
      .filter((l) => l.trim())
      .slice(-3)
      .join(' | ');
    throw new PolarError(
      `the rollouts on ${c.choice.engine} (polar eval --out ${run.out}) ended with ${result.signal ?? `exit ${result.exitCode}`}: ${last || 'no output'}`,
      { hint: `--resume continues the step; the eval's own logs are under ${join(run.out, '.cluster')}` },
    );
  }
  const report = readRunReport(join(run.out, EVAL_FILES.report));
  const results = [...(await readResults(join(run.out, EVAL_FILES.results))).values()];
  return { report, results, interrupted: false };
}
