/**
 * `polar eval --cluster slurm` inside an allocation (SLURM_JOB_ID set: under salloc, or in an sbatch
 * script of the user's): the shards run as the tasks of one `srun` step on the allocation's nodes (no
 * new job waits in the queue), then this process merges the shard folders into OUT as `polar eval
 * --merge` does. The same shard script and jobs as the array job's (src/rollout/executors/slurm-scripts.ts),
 * its index from SLURM_PROCID. Shards: the executor's, else the allocation's tasks (SLURM_NTASKS), else
 * its nodes.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { EnvironmentError } from '../../errors.ts';
import { log } from '../../util/log.ts';
import { plural } from '../../util/plural.ts';
import { mkdirPrivate, PRIVATE_SCRIPT } from '../../util/private-files.ts';
import type { SweInstance } from '../dataset.ts';
import { prepareOut } from '../run/out.ts';
import type { EvalOutcome } from '../run/run.ts';
import type { SlurmJob } from './job.ts';
import { mergeRuns } from './merge.ts';
import {
  exitStatus,
  finishedSamples,
  resetWork,
  shardFailure,
  shardPlan,
  shardScript,
  writeShardJobs,
} from './slurm-scripts.ts';

/** The job's samples as the tasks of one srun step; the merged run's outcome, or null when interrupted. */
export async function runInAllocation(job: SlurmJob, instances: SweInstance[]): Promise<EvalOutcome | null> {
  const allocation = process.env.SLURM_JOB_ID;
  const nodes = Number(process.env.SLURM_JOB_NUM_NODES ?? 1);
  const tasks = Number(process.env.SLURM_NTASKS ?? 0);
  const plan = shardPlan(job, instances, tasks > 0 ? tasks : nodes);
  await prepareOut(plan.out, job);
  await resetWork(plan, job.resume);
  await mkdirPrivate(plan.logs);
  await writeShardJobs(plan, job);
  const script = join(plan.logs, 'steps.sh');
  await writeFile(script, shardScript(plan, '$((SLURM_PROCID + 1))', { ownLog: true }), {
    mode: PRIVATE_SCRIPT,
  });
  log.info(
    `slurm: inside job ${allocation} (${plural(nodes, 'node')}): ${plural(plan.shards, 'shard')} as the tasks of one srun step; logs in ${plan.logs}`,
  );
  const child = execa(
    'srun',
    [
      `--ntasks=${plan.shards}`,
      `--cpus-per-task=${job.executor.cpus * job.concurrency}`,
      '--kill-on-bad-exit=0',
      `--job-name=polar-eval`,
      script,
    ],
    { reject: false, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe', all: true },
  );
  let interrupted = false;
  const onSigint = () => {
    interrupted = true;
    child.kill('SIGTERM'); // srun passes it to its tasks; --resume continues their shards
  };
  process.once('SIGINT', onSigint);
  const total = instances.length * job.samples;
  let last = -1;
  const timer = setInterval(() => {
    const n = finishedSamples(plan);
    if (n !== last) log.info(`slurm: ${n}/${total} samples`);
    last = n;
  }, 2000);
  let r: Awaited<typeof child>;
  try {
    r = await child;
  } finally {
    clearInterval(timer);
    process.removeListener('SIGINT', onSigint);
  }
  if ((r as { code?: string }).code === 'ENOENT')
    throw new EnvironmentError(
      '--cluster slurm: srun not found',
      'run polar inside the allocation of a Slurm job',
    );
  if (interrupted) {
    log.warn(
      'interrupted: finished samples are kept in the shard folders; the same command with --resume runs the rest',
    );
    return null;
  }
  const failed: number[] = [];
  for (let i = 1; i <= plan.shards; i++) if (exitStatus(plan.exitFile(i)) !== 0) failed.push(i);
  if (failed.length)
    throw shardFailure(
      plan,
      failed,
      `srun exit ${r.exitCode}${String(r.all ?? '').trim() ? `: ${String(r.all).trim().split('\n').at(-1)}` : ''}`,
    );
  const dirs = Array.from({ length: plan.shards }, (_, k) => plan.shardDir(k + 1));
  return mergeRuns(dirs, {
    instances,
    samples: job.samples,
    out: job.out,
    dataset: job.dataset,
    overwrite: false,
  });
}
