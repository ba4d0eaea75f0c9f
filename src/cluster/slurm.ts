/**
 * `polar eval --cluster slurm`: one Slurm array task per shard (`sbatch --array=1-N`, each `polar eval
 * --shard i/N --resume` into its own folder under OUT/.cluster/shards), then a merge job
 * (`--dependency=afterok`) running `polar eval --merge` into OUT. Array tasks are `--requeue`d: a task
 * whose node fails runs again elsewhere and --resume keeps the samples its shard had finished. polar
 * follows the jobs with squeue (and sacct when the accounting daemon is there) until the merge ends.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { execa } from 'execa';
import { EnvironmentError, EXIT, PolarError } from '../errors.ts';
import { type EvalFlags, finish } from '../eval/command.ts';
import { EVAL_FILES } from '../eval/files.ts';
import { prepareOut } from '../eval/out.ts';
import type { Report } from '../eval/report.ts';
import { backendUrls } from '../options/backend.ts';
import type { SweInstance } from '../rollout/dataset.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import { mkdirPrivate, PRIVATE_SCRIPT } from '../util/private-files.ts';
import { nodeArgv, wordsAfter } from './argv.ts';
import { nodeEnv, polarCommand } from './eval.ts';

const quote = (word: string): string =>
  /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;

export interface SlurmPlan {
  shards: number;
  /** the array job's script and the merge job's */
  array: string;
  merge: string;
  shardDir: (i: number | string) => string;
  logs: string;
}

/** The two batch scripts of a sharded run (written under OUT/.cluster/slurm). */
export function slurmScripts(f: EvalFlags, instances: SweInstance[], argv: string[]): SlurmPlan {
  const out = resolve(f.out);
  const work = join(out, '.cluster');
  const shards = Math.min(f.clusterShards ?? Math.min(instances.length, 8), instances.length);
  const polar = polarCommand(f.clusterPolar).map(quote).join(' ');
  const words = nodeArgv(wordsAfter(argv, 'eval')).map(quote).join(' ');
  const urls = backendUrls(f);
  const server = urls.length ? ` --backend-url ${quote(urls.join(','))}` : '';
  const selection = [
    ...(f.instances ? ['--instances', f.instances.join(',')] : []),
    ...(f.limit !== undefined ? ['--limit', String(f.limit)] : []),
  ]
    .map(quote)
    .join(' ');
  const shardDir = (i: number | string) => join(work, 'shards', `shard-${i}`);
  const logs = join(work, 'slurm');
  const env = Object.entries(nodeEnv())
    .map(([k, v]) => `export ${k}=${quote(v)}\n`)
    .join('');
  const extra = (f.sbatchArg ?? []).map((a) => `#SBATCH ${a}\n`).join('');
  const header = (name: string) =>
    `#!/bin/bash\n#SBATCH --job-name=${name}\n${extra}set -euo pipefail\ncd ${quote(process.cwd())}\n${env}`;
  const array =
    `${header('polar-eval')}` +
    `# one shard of ${shards}: --resume keeps what an earlier run of this task (a requeue) finished\n` +
    `exec ${polar} eval ${words}${server} ${selection} --concurrency ${f.concurrency} --skip-backend-check --quiet ` +
    `--shard "$SLURM_ARRAY_TASK_ID/${shards}" --out "${shardDir('$SLURM_ARRAY_TASK_ID')}" --resume\n`;
  const dirs = Array.from({ length: shards }, (_, k) => quote(shardDir(k + 1))).join(' ');
  const merge =
    `${header('polar-merge')}` +
    `exec ${polar} eval --merge ${dirs} --dataset ${quote(f.dataset)} --split ${quote(f.split)} ${selection} ` +
    `--samples ${f.samples} --out ${quote(out)} --json\n`;
  return { shards, array, merge, shardDir, logs };
}

async function run(file: string, args: string[]): Promise<string> {
  const r = await execa(file, args, { reject: false });
  if ((r as { code?: string }).code === 'ENOENT')
    throw new EnvironmentError(
      `--cluster slurm: ${file} not found`,
      'run polar on a Slurm login node (sbatch, squeue on PATH)',
    );
  if (r.exitCode !== 0) throw new PolarError(`${file} ${args.join(' ')} failed: ${String(r.stderr).trim()}`);
  return String(r.stdout).trim();
}

/** The jobs' states: squeue while queued or running; sacct (when there) for the ones that left. */
async function states(ids: string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  const q = await execa('squeue', ['-h', '-j', ids.join(','), '-o', '%i %T %r'], { reject: false });
  for (const line of String(q.stdout).split('\n')) {
    const [id, state, reason] = line.trim().split(/\s+/);
    if (id && state) found.set(id, reason === 'DependencyNeverSatisfied' ? 'NEVER' : state);
  }
  const a = await execa('sacct', ['-n', '-P', '-X', '-j', ids.join(','), '-o', 'JobID,State'], {
    reject: false,
  });
  if (a.exitCode === 0)
    for (const line of String(a.stdout).split('\n')) {
      const [id, state] = line.trim().split('|');
      if (id && state && !found.has(id)) found.set(id, state.split(' ')[0]!);
    }
  return found;
}

/** Samples finished so far, over the shard folders. */
function finished(plan: SlurmPlan): number {
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

export async function slurmEval(f: EvalFlags, instances: SweInstance[], argv: string[]): Promise<number> {
  const plan = slurmScripts(f, instances, argv);
  await prepareOut(resolve(f.out), f);
  await mkdirPrivate(plan.logs);
  const arrayScript = join(plan.logs, 'array.sh');
  const mergeScript = join(plan.logs, 'merge.sh');
  // the scripts hold the servers' URLs as given (credentials included): owner only
  await writeFile(arrayScript, plan.array, { mode: PRIVATE_SCRIPT });
  await writeFile(mergeScript, plan.merge, { mode: PRIVATE_SCRIPT });
  const arrayId = (
    await run('sbatch', [
      '--parsable',
      `--array=1-${plan.shards}`,
      '--requeue',
      `--cpus-per-task=${f.clusterCpus}`,
      `--mem=${Math.ceil(f.clusterMemory / 1024 ** 2)}M`,
      `--output=${join(plan.logs, 'shard-%a.log')}`,
      arrayScript,
    ])
  ).split(';')[0]!;
  const mergeId = (
    await run('sbatch', [
      '--parsable',
      `--dependency=afterok:${arrayId}`,
      '--kill-on-invalid-dep=yes',
      `--output=${join(plan.logs, 'merge.log')}`,
      mergeScript,
    ])
  ).split(';')[0]!;
  log.info(
    `slurm: array job ${arrayId} (${plural(plan.shards, 'shard')}) and merge job ${mergeId}; logs in ${plan.logs}`,
  );
  const total = instances.length * f.samples;
  let interrupted = false;
  const onSigint = () => {
    interrupted = true;
  };
  process.once('SIGINT', onSigint);
  let last = '';
  try {
    for (;;) {
      const s = await states([arrayId, mergeId]);
      const merge = s.get(mergeId);
      const line = `slurm: ${finished(plan)}/${total} samples; array ${s.get(arrayId) ?? 'done'}, merge ${merge ?? 'done'}`;
      if (line !== last) log.info(line);
      last = line;
      if (merge === 'NEVER' || merge === 'CANCELLED' || merge === 'FAILED') {
        await execa('scancel', [mergeId], { reject: false });
        throw new PolarError(`slurm: a shard failed, the merge job ${mergeId} will not run`, {
          hint: `see ${plan.logs}/shard-*.log; submit again with --resume to rerun the failed shards`,
        });
      }
      if (merge === undefined || merge === 'COMPLETED') break;
      if (interrupted) {
        log.warn(`the jobs go on in Slurm: follow them with squeue -j ${arrayId},${mergeId} or scancel them`);
        return EXIT.interrupted;
      }
      await new Promise((r) => setTimeout(r, 2000));
    }
  } finally {
    process.removeListener('SIGINT', onSigint);
  }
  const reportPath = join(resolve(f.out), EVAL_FILES.report);
  if (!existsSync(reportPath))
    throw new PolarError(`slurm: the merge job ${mergeId} ended without ${reportPath}`, {
      hint: `see ${join(plan.logs, 'merge.log')}`,
    });
  const report = JSON.parse(readFileSync(reportPath, 'utf8')) as Report;
  log.debug(`shards: ${readdirSync(join(resolve(f.out), '.cluster', 'shards')).join(', ')}`);
  return finish(f, { report, results: [], interrupted: false });
}
