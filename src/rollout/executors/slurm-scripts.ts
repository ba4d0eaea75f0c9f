/**
 * The shell side of `polar eval --cluster slurm`: the folders of a sharded run under OUT/.cluster, the
 * script one shard runs (an sbatch array task, or an srun task inside an allocation), the merge job's
 * script, and what the shards left behind (their exit files, the samples they finished). Every shard and
 * the merge write their exit status to a file of their own: with that, polar follows its jobs with squeue
 * alone and needs no accounting database (sacct and slurmdbd), and a job that left squeue long ago
 * still says how it ended.
 */
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { PolarError } from '../../errors.ts';
import type { EvalFlags } from '../../eval/flags.ts';
import { backendUrls } from '../../options/backend.ts';
import { nodeEnv, polarCommand } from '../../train/cluster/polar.ts';
import { plural } from '../../util/plural.ts';
import type { SweInstance } from '../dataset.ts';
import { EVAL_FILES, EVAL_RUN_ENTRIES } from '../run/files.ts';
import { nodeArgv, wordsAfter } from './argv.ts';

/** A word as bash reads it back unchanged. */
export const quote = (word: string): string =>
  /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;

export interface ShardPlan {
  out: string;
  shards: number;
  /** OUT/.cluster/shards/shard-i: one shard's run folder */
  shardDir: (i: number | string) => string;
  /** OUT/.cluster/slurm: scripts, logs, exit files */
  logs: string;
  /** OUT/.cluster/slurm/shard-i.exit */
  exitFile: (i: number | string) => string;
  /** OUT/.cluster/slurm/shard-i.log */
  logFile: (i: number | string) => string;
  /** polar eval words every shard runs, but --shard, --out and the tag */
  words: string;
  polar: string;
  selection: string;
}

/** The shards of a run: --cluster-shards, else `fallback` (at most 8), never more than the instances. */
export function shardPlan(
  f: EvalFlags,
  instances: SweInstance[],
  argv: string[],
  fallback = Math.min(instances.length, 8),
): ShardPlan {
  const out = resolve(f.out);
  const work = join(out, EVAL_FILES.cluster);
  const logs = join(work, 'slurm');
  const urls = backendUrls(f);
  const selection = [
    ...(f.instances ? ['--instances', f.instances.join(',')] : []),
    ...(f.limit !== undefined ? ['--limit', String(f.limit)] : []),
  ];
  const words = [
    ...nodeArgv(wordsAfter(argv, 'eval')).map(quote),
    ...(urls.length ? ['--backend-url', quote(urls.join(','))] : []),
    ...selection.map(quote),
    '--concurrency',
    String(f.concurrency),
    '--skip-backend-check',
  ].join(' ');
  return {
    out,
    shards: Math.max(1, Math.min(f.clusterShards ?? fallback, instances.length)),
    shardDir: (i) => join(work, 'shards', `shard-${i}`),
    logs,
    exitFile: (i) => join(logs, `shard-${i}.exit`),
    logFile: (i) => join(logs, `shard-${i}.log`),
    words,
    polar: polarCommand(f.clusterPolar).map(quote).join(' '),
    selection: selection.map(quote).join(' '),
  };
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
 * job, $((SLURM_PROCID + 1)) in an srun step). --resume keeps what an earlier run of the shard (a
 * requeue) finished; each result line says where it ran (`cluster`, the node and job).
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
    `shards=${quote(join(plan.shardDir(1), '..'))}\n` +
    `rm -f "$logs/shard-$shard.exit"\n` +
    `node_name="\${SLURMD_NODENAME:-$(hostname)}"\n` +
    `tag="{\\"engine\\":\\"slurm\\",\\"node\\":\\"$node_name\\",\\"job_id\\":\\"\${SLURM_JOB_ID:-}\\",\\"shard\\":$shard}"\n` +
    `# one shard of ${plan.shards}\n` +
    `${plan.polar} eval ${plan.words} --shard "$shard/${plan.shards}" --out "$shards/shard-$shard" --resume --cluster-tag "$tag"\n` +
    `rc=$?\n` +
    `echo "$rc" > "$logs/shard-$shard.exit"\n` +
    `exit "$rc"\n`
  );
}

/** The merge job's script: `polar eval --merge` of every shard folder into OUT, its exit status kept. */
export function mergeScript(plan: ShardPlan, f: EvalFlags, sbatch: string[] = []): string {
  const dirs = Array.from({ length: plan.shards }, (_, k) => quote(plan.shardDir(k + 1))).join(' ');
  const exit = join(plan.logs, 'merge.exit');
  return (
    `${header('polar-merge', sbatch)}` +
    `rm -f ${quote(exit)}\n` +
    `${plan.polar} eval --merge ${dirs} --dataset ${quote(f.dataset)} --split ${quote(f.split)} ${plan.selection} ` +
    `--samples ${f.samples} --out ${quote(plan.out)} --json\n` +
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
