/**
 * `polar eval --cluster slurm` from a login node: one Slurm array task per shard (`sbatch --array=1-N`,
 * each running its shard's rollout job, `polar job`, into its own folder under OUT/.cluster/shards),
 * then a merge job (`--dependency=afterok`) taking the shard folders into OUT as `polar eval --merge`
 * does. Array tasks are `--requeue`d: a task whose node fails runs again elsewhere and its job resumes
 * the samples its shard had finished. polar follows the jobs with `squeue -t all` and the jobs' own exit
 * files (src/rollout/executors/slurm-scripts.ts) until the merge ends: no accounting daemon is needed.
 * Run from inside an allocation (SLURM_JOB_ID set: salloc, an sbatch script), the shards are srun tasks
 * of that allocation instead (src/rollout/executors/slurm-steps.ts).
 */
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { EnvironmentError, PolarError } from '../../errors.ts';
import { log } from '../../util/log.ts';
import { plural } from '../../util/plural.ts';
import { mkdirPrivate, PRIVATE_SCRIPT } from '../../util/private-files.ts';
import type { SweInstance } from '../dataset.ts';
import { EVAL_FILES } from '../run/files.ts';
import { prepareOut } from '../run/out.ts';
import { readRunReport } from '../run/read-report.ts';
import type { EvalOutcome } from '../run/run.ts';
import type { SlurmJob } from './job.ts';
import {
  exitStatus,
  finishedSamples,
  logTail,
  mergeScript,
  resetWork,
  type ShardPlan,
  shardFailure,
  shardPlan,
  shardScript,
  writeShardJobs,
} from './slurm-scripts.ts';

/** Runs a Slurm client; its stdout, or a PolarError with its stderr. */
export async function slurmCommand(file: string, args: string[]): Promise<string> {
  const r = await execa(file, args, { reject: false });
  if ((r as { code?: string }).code === 'ENOENT')
    throw new EnvironmentError(
      `--cluster slurm: ${file} not found`,
      'run polar on a Slurm login node or inside an allocation (sbatch, squeue, srun on PATH)',
    );
  if (r.exitCode !== 0) throw new PolarError(`${file} ${args.join(' ')} failed: ${String(r.stderr).trim()}`);
  return String(r.stdout).trim();
}

export interface JobStates {
  /** array task index -> state */
  tasks: Map<number, string>;
  /** array tasks still pending as a range (A_[2-4]) */
  pendingRange: boolean;
  /** the merge job's state and reason */
  merge?: { state: string; reason: string };
}

/** `squeue -t all` lines (`%i|%T|%r`) of the array job and the merge job, read into states. */
export function parseSqueue(text: string, arrayId: string, mergeId: string): JobStates {
  const states: JobStates = { tasks: new Map(), pendingRange: false };
  for (const line of text.split('\n')) {
    const [id, state, reason] = line.trim().split('|');
    if (!id || !state) continue;
    if (id === mergeId) states.merge = { state, reason: reason ?? '' };
    else if (id.startsWith(`${arrayId}_[`)) states.pendingRange = true;
    else if (id.startsWith(`${arrayId}_`)) states.tasks.set(Number(id.slice(arrayId.length + 1)), state);
  }
  return states;
}

const FAILED = new Set([
  'FAILED',
  'CANCELLED',
  'TIMEOUT',
  'NODE_FAIL',
  'OUT_OF_MEMORY',
  'BOOT_FAIL',
  'DEADLINE',
  'PREEMPTED',
]);

/** Shards that failed: a non-zero exit file, or a final failed state in squeue with no exit file. */
function failedShards(plan: ShardPlan, states: JobStates): number[] {
  const failed: number[] = [];
  for (let i = 1; i <= plan.shards; i++) {
    const code = exitStatus(plan.exitFile(i));
    if (code !== undefined ? code !== 0 : FAILED.has(states.tasks.get(i) ?? '')) failed.push(i);
  }
  return failed;
}

/** One line of progress: samples finished, shards by state, the merge. */
function progressLine(plan: ShardPlan, total: number, states: JobStates): string {
  const count = new Map<string, number>();
  for (let i = 1; i <= plan.shards; i++) {
    const code = exitStatus(plan.exitFile(i));
    const state =
      code !== undefined
        ? code === 0
          ? 'done'
          : 'failed'
        : (states.tasks.get(i)?.toLowerCase() ?? (states.pendingRange ? 'pending' : 'gone'));
    count.set(state, (count.get(state) ?? 0) + 1);
  }
  const shards = [...count].map(([s, n]) => `${n} ${s}`).join(', ');
  return `slurm: ${finishedSamples(plan)}/${total} samples; shards ${shards}; merge ${states.merge?.state.toLowerCase() ?? 'gone'}`;
}

/**
 * The job's samples on Slurm; the merged run's outcome, or null when interrupted here (the jobs go on in
 * Slurm: said, with how to follow them).
 */
export async function runOnSlurm(job: SlurmJob, instances: SweInstance[]): Promise<EvalOutcome | null> {
  if (process.env.SLURM_JOB_ID) return (await import('./slurm-steps.ts')).runInAllocation(job, instances);
  const plan = shardPlan(job, instances);
  await prepareOut(plan.out, job);
  await resetWork(plan, job.resume);
  await mkdirPrivate(plan.logs);
  // the scripts and jobs hold the servers' URLs as given (credentials included): owner only
  const arrayScript = join(plan.logs, 'array.sh');
  const mergeScriptPath = join(plan.logs, 'merge.sh');
  const { executor } = job;
  await writeShardJobs(plan, job);
  await writeFile(arrayScript, shardScript(plan, '$SLURM_ARRAY_TASK_ID', { sbatch: executor.sbatch }), {
    mode: PRIVATE_SCRIPT,
  });
  await writeFile(mergeScriptPath, mergeScript(plan, executor.sbatch), { mode: PRIVATE_SCRIPT });
  // a task runs `concurrency` samples at once, each asking the executor's CPUs and memory
  const arrayId = (
    await slurmCommand('sbatch', [
      '--parsable',
      `--array=1-${plan.shards}`,
      '--requeue',
      `--cpus-per-task=${executor.cpus * job.concurrency}`,
      `--mem=${Math.ceil((executor.memoryBytes * job.concurrency) / 1024 ** 2)}M`,
      `--output=${join(plan.logs, 'shard-%a.log')}`,
      arrayScript,
    ])
  ).split(';')[0]!;
  const mergeId = (
    await slurmCommand('sbatch', [
      '--parsable',
      `--dependency=afterok:${arrayId}`,
      '--kill-on-invalid-dep=yes',
      `--output=${join(plan.logs, 'merge.log')}`,
      mergeScriptPath,
    ])
  ).split(';')[0]!;
  log.info(
    `slurm: array job ${arrayId} (${plural(plan.shards, 'shard')}) and merge job ${mergeId}; logs in ${plan.logs}`,
  );
  const outcome = await follow(plan, instances.length * job.samples, arrayId, mergeId);
  if (outcome === 'interrupted') {
    log.warn(`the jobs go on in Slurm: follow them with squeue -j ${arrayId},${mergeId} or scancel them`);
    return null;
  }
  const reportPath = join(plan.out, EVAL_FILES.report);
  if (!existsSync(reportPath))
    throw new PolarError(`slurm: the merge job ${mergeId} ended without ${reportPath}`, {
      hint: `see ${join(plan.logs, 'merge.log')}`,
    });
  const report = readRunReport(reportPath, `see ${join(plan.logs, 'merge.log')}`);
  return { report, results: [], interrupted: false };
}

/** Follows the jobs until the merge ends; throws when a shard or the merge failed. */
async function follow(
  plan: ShardPlan,
  total: number,
  arrayId: string,
  mergeId: string,
): Promise<'merged' | 'interrupted'> {
  let interrupted = false;
  const onSigint = () => {
    interrupted = true;
  };
  process.once('SIGINT', onSigint);
  let last = '';
  let completed = 0;
  try {
    for (;;) {
      const q = await execa('squeue', ['-t', 'all', '-h', '-j', `${arrayId},${mergeId}`, '-o', '%i|%T|%r'], {
        reject: false,
      });
      // squeue fails for a moment when the controller is busy: the next round asks again
      const states = parseSqueue(q.exitCode === 0 ? String(q.stdout) : '', arrayId, mergeId);
      if (q.exitCode !== 0) states.merge = { state: 'UNKNOWN', reason: '' };
      const line = progressLine(plan, total, states);
      if (line !== last) log.info(line);
      last = line;
      const merged = exitStatus(join(plan.logs, 'merge.exit'));
      if (merged === 0) return 'merged';
      if (merged !== undefined)
        throw new PolarError(`slurm: the merge job ${mergeId} failed (exit ${merged})`, {
          hint: `see ${join(plan.logs, 'merge.log')}:\n${logTail(join(plan.logs, 'merge.log'))}`,
        });
      const failed = failedShards(plan, states);
      const merge = states.merge;
      if (failed.length || merge?.reason === 'DependencyNeverSatisfied' || FAILED.has(merge?.state ?? '')) {
        await execa('scancel', [mergeId], { reject: false });
        if (failed.length) throw shardFailure(plan, failed, `the merge job ${mergeId} will not run`);
        throw new PolarError(`slurm: the merge job ${mergeId} ended ${merge?.state} (${merge?.reason})`, {
          hint: `see ${plan.logs}`,
        });
      }
      // COMPLETED before its exit file shows on this machine (a shared file system's delay): wait a little
      if (merge?.state === 'COMPLETED' && ++completed > 15)
        throw new PolarError(`slurm: the merge job ${mergeId} completed but wrote no exit status`, {
          hint: `is ${plan.out} on a file system this machine and the nodes share? see ${plan.logs}`,
        });
      if (!merge && q.exitCode === 0)
        throw new PolarError(
          `slurm: the merge job ${mergeId} left the queue without an exit status (cancelled before it started?)`,
          { hint: `see ${plan.logs}; submit again with --resume` },
        );
      if (interrupted) return 'interrupted';
      await new Promise((r) => setTimeout(r, 2000));
    }
  } finally {
    process.removeListener('SIGINT', onSigint);
  }
}
