/**
 * The shell side of `polar eval --cluster slurm`: the folders of a sharded run under OUT/.cluster, the
 * script one shard runs (an sbatch array task, or an srun task inside an allocation) with the rollout
 * job of its shard (src/rollout/executors/job.ts: a file beside the scripts), the merge job's script and
 * job, and what the shards left behind (their exit files, the samples they finished). Every shard and
 * the merge write their exit status to a file of their own: with that, polar follows its jobs with squeue
 * alone and needs no accounting database (sacct and slurmdbd), and a job that left squeue long ago
 * still says how it ended.
 */
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { PolarError } from '../../errors.ts';
import { nodeEnv } from '../../train/cluster/polar.ts';
import { plural } from '../../util/plural.ts';
import type { SweInstance } from '../dataset.ts';
import { EVAL_FILES, EVAL_RUN_ENTRIES } from '../run/files.ts';
import { nodeJob, type RolloutJob, type SlurmJob, writeJob } from './job.ts';

/** A word as bash reads it back unchanged. */
export const quote = (word: string): string =>
  /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;

export interface ShardPlan {
  out: string;
  shards: number;
  /** OUT/.cluster/shards/shard-i: one shard's run folder */
  shardDir: (i: number | string) => string;
  /** OUT/.cluster/slurm: scripts, jobs, logs, exit files */
  logs: string;
  /** OUT/.cluster/slurm/shard-i.exit */
  exitFile: (i: number | string) => string;
  /** OUT/.cluster/slurm/shard-i.log */
  logFile: (i: number | string) => string;
  /** OUT/.cluster/slurm/shard-i.job.json: the shard's rollout job */
  jobFile: (i: number | string) => string;
  /** OUT/.cluster/slurm/merge.job.json */
  mergeJobFile: string;
  /** how a node starts polar, quoted for bash */
  polar: string;
}

/** The shards of a run: the executor's shards, else `fallback` (at most 8), never more than the instances. */
export function shardPlan(
  job: SlurmJob,
  instances: SweInstance[],
  fallback = Math.min(instances.length, 8),
): ShardPlan {
  const out = resolve(job.out);
  const work = join(out, EVAL_FILES.cluster);
  const logs = join(work, 'slurm');
  return {
    out,
    shards: Math.max(1, Math.min(job.executor.shards ?? fallback, instances.length)),
    shardDir: (i) => join(work, 'shards', `shard-${i}`),
    logs,
    exitFile: (i) => join(logs, `shard-${i}.exit`),
    logFile: (i) => join(logs, `shard-${i}.log`),
    jobFile: (i) => join(logs, `shard-${i}.job.json`),
    mergeJobFile: join(logs, 'merge.job.json'),
    polar: job.executor.polar.map(quote).join(' '),
  };
}

/**
 * The jobs of a sharded run: shard i runs its share of the instances into its own folder on this
 * machine's pool (--resume: a requeued shard keeps what it finished; no server probe: the driver checked
 * the servers), and the merge job takes the shard folders into OUT.
 */
export async function writeShardJobs(plan: ShardPlan, job: RolloutJob): Promise<void> {
  const node = nodeJob(job, { resume: true });
  for (let i = 1; i <= plan.shards; i++)
    await writeJob(plan.jobFile(i), {
      ...node,
      shard: { index: i, count: plan.shards },
      out: plan.shardDir(i),
    });
  const dirs = Array.from({ length: plan.shards }, (_, k) => plan.shardDir(k + 1));
  await writeJob(plan.mergeJobFile, { ...node, resume: false, out: plan.out, merge: dirs });
}

function header(name: string, sbatch: string[] = []): string {
  const env = Object.entries(nodeEnv())
    .map(([k, v]) => `export ${k}=${quote(v)}\n`)
    .join('');
  const lines = sbatch.map((a) => `#SBATCH ${a}\n`).join('');
  return `#!/bin/bash\n#SBATCH --job-name=${name}\n${lines}set -uo pipefail\ncd ${quote(process.cwd())}\n${env}`;
}

/**
 * The script of one shard: `shardExpr` is bash for its 1-based index ($SLURM_ARRAY_TASK_ID in an array
 * job, $((SLURM_PROCID + 1)) in an srun step), its job the shard's file (writeShardJobs: resumed, so a
 * requeued shard keeps what it finished); each result line says where it ran (`cluster`, the node and job).
 */
export function shardScript(
  plan: ShardPlan,
  shardExpr: string,
  { sbatch = [], ownLog = false }: { sbatch?: string[]; ownLog?: boolean } = {},
): string {
  return (
    `${header('polar-eval', sbatch)}` +
    `shard=${shardExpr}\n` +
    `logs=${quote(plan.logs)}\n` +
    (ownLog ? 'exec >>"$logs/shard-$shard.log" 2>&1\n' : '') +
    `rm -f "$logs/shard-$shard.exit"\n` +
    `node_name="\${SLURMD_NODENAME:-$(hostname)}"\n` +
    `tag="{\\"engine\\":\\"slurm\\",\\"node\\":\\"$node_name\\",\\"job_id\\":\\"\${SLURM_JOB_ID:-}\\",\\"shard\\":$shard}"\n` +
    `# one shard of ${plan.shards}\n` +
    `${plan.polar} job "$logs/shard-$shard.job.json" --cluster-tag "$tag"\n` +
    `rc=$?\n` +
    `echo "$rc" > "$logs/shard-$shard.exit"\n` +
    `exit "$rc"\n`
  );
}

/** The merge job's script: the merge job (the shard folders into OUT, the report as JSON), its exit status kept. */
export function mergeScript(plan: ShardPlan, sbatch: string[] = []): string {
  const exit = join(plan.logs, 'merge.exit');
  return (
    `${header('polar-merge', sbatch)}` +
    `rm -f ${quote(exit)}\n` +
    `${plan.polar} job ${quote(plan.mergeJobFile)}\n` +
    `rc=$?\n` +
    `echo "$rc" > ${quote(exit)}\n` +
    `exit "$rc"\n`
  );
}

/** A job's exit status from its exit file; undefined while it has none. */
export function exitStatus(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  const text = readFileSync(file, 'utf8').trim();
  return text === '' ? undefined : Number(text);
}

/** Samples finished so far, over the shard folders. */
export function finishedSamples(plan: ShardPlan): number {
  let n = 0;
  for (let i = 1; i <= plan.shards; i++) {
    const file = join(plan.shardDir(i), EVAL_FILES.results);
    if (existsSync(file))
      n += readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.trim()).length;
  }
  return n;
}

/**
 * OUT before the shards run: a new run drops what an earlier one left under .cluster (its shard folders
 * would otherwise be resumed); --resume keeps the shard folders (they hold the finished samples) and
 * drops the merged files of the earlier run, which the merge writes again.
 */
export async function resetWork(plan: ShardPlan, resume: boolean): Promise<void> {
  const work = join(plan.out, EVAL_FILES.cluster);
  if (!resume) {
    await rm(join(work, 'shards'), { recursive: true, force: true });
    await rm(plan.logs, { recursive: true, force: true });
    return;
  }
  for (const name of [...EVAL_RUN_ENTRIES, EVAL_FILES.predictionsDir])
    await rm(join(plan.out, name), { recursive: true, force: true });
  await rm(join(plan.logs, 'merge.exit'), { force: true });
}

/** The last lines of a log, for an error message. */
export function logTail(file: string, lines = 5): string {
  if (!existsSync(file)) return `(no ${file})`;
  return readFileSync(file, 'utf8').trim().split('\n').slice(-lines).join('\n');
}

/** The error of failed shards: which, and the end of the first one's log. */
export function shardFailure(plan: ShardPlan, failed: number[], what: string): PolarError {
  const first = failed[0]!;
  return new PolarError(
    `slurm: ${plural(failed.length, 'shard')} failed (${failed.map((i) => `shard ${i}`).join(', ')}), ${what}; shard ${first}'s log ends:\n${logTail(plan.logFile(first))}`,
    {
      hint: `logs in ${plan.logs}; finished samples are kept: the same command with --resume runs the rest`,
    },
  );
}
