/**
 * The run folders of a sharded run (`--shard i/n`, one per Slurm array task or CI matrix job) merged into
 * the folder one machine would have written: `polar eval --merge DIR...` (src/eval/merge.ts) and the
 * Slurm executor's merge (its merge job, or this process inside an allocation). Refused,
 * with the instance ids named, when two folders hold the same sample, when a sample of the dataset's
 * selection is in none of them, or when a folder holds a sample the selection does not have.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { UsageError } from '../../errors.ts';
import { log } from '../../util/log.ts';
import { plural } from '../../util/plural.ts';
import type { SweInstance } from '../dataset.ts';
import { EVAL_FILES } from '../run/files.ts';
import { readRunReport } from '../run/read-report.ts';
import type { Report } from '../run/report.ts';
import { readResults, sampleKey } from '../run/results.ts';
import { type EvalOutcome, runEvalWith } from '../run/run.ts';
import { adoptSample } from './adopt.ts';

interface Shard {
  dir: string;
  keys: Set<string>;
  report: Pick<Report, 'agent' | 'model' | 'runtime' | 'samples'>;
}

function readShard(dir: string): Shard {
  const results = join(dir, EVAL_FILES.results);
  const reportPath = join(dir, EVAL_FILES.report);
  if (!existsSync(results) || !existsSync(reportPath))
    throw new UsageError(
      `--merge ${dir}: not a finished run folder (no ${EVAL_FILES.results} or ${EVAL_FILES.report})`,
      'give the --out folders of finished `polar eval --shard i/n` runs',
    );
  const report = readRunReport(
    reportPath,
    'give the --out folders of finished `polar eval --shard i/n` runs of this polar',
  );
  return { dir, keys: new Set(), report };
}

const named = (keys: string[]): string =>
  `${keys.slice(0, 10).join(', ')}${keys.length > 10 ? ` and ${keys.length - 10} more` : ''}`;

/** The folder holding each sample; refuses overlaps, gaps and strangers (the ids named). */
export async function planMerge(
  dirs: string[],
  expected: string[],
): Promise<{ shards: Shard[]; owner: Map<string, Shard> }> {
  const shards = dirs.map((d) => readShard(resolve(d)));
  const owner = new Map<string, Shard>();
  const overlaps: string[] = [];
  for (const shard of shards) {
    for (const key of (await readResults(join(shard.dir, EVAL_FILES.results))).keys()) {
      shard.keys.add(key);
      const first = owner.get(key);
      if (first) overlaps.push(`${key} (${first.dir} and ${shard.dir})`);
      else owner.set(key, shard);
    }
  }
  if (overlaps.length)
    throw new UsageError(
      `--merge: ${plural(overlaps.length, 'sample')} in more than one folder: ${named(overlaps)}`,
      'each sample must come from one shard: were the same shards given twice, or run with different --shard counts?',
    );
  const want = new Set(expected);
  const missing = expected.filter((k) => !owner.has(k));
  if (missing.length)
    throw new UsageError(
      `--merge: ${plural(missing.length, 'sample')} of the selection in no folder: ${named(missing)}`,
      'give every shard folder (a shard whose job failed: run it again with --resume, then merge)',
    );
  const strangers = [...owner.keys()].filter((k) => !want.has(k));
  if (strangers.length)
    throw new UsageError(
      `--merge: ${plural(strangers.length, 'sample')} not in the selection of --dataset: ${named(strangers)}`,
      'give the --dataset, --instances, --limit and --samples the shards were run with',
    );
  for (const field of ['agent', 'model', 'runtime'] as const) {
    const values = new Set(shards.map((s) => s.report[field]));
    if (values.size > 1)
      throw new UsageError(
        `--merge: the folders were run with different ${field}s: ${[...values].join(', ')}`,
      );
  }
  return { shards, owner };
}

/** What a merge makes: the run of `instances` in `out`, from the dataset `dataset`. */
export interface MergePlan {
  instances: SweInstance[];
  /** the samples per instance when the first folder's report does not say */
  samples: number;
  out: string;
  dataset: string;
  overwrite: boolean;
}

/** The shard folders `dirs` merged into `plan.out`; refuses overlaps, gaps and strangers (planMerge). */
export async function mergeRuns(dirs: string[], plan: MergePlan): Promise<EvalOutcome> {
  const samples = readShard(resolve(dirs[0]!)).report.samples ?? plan.samples;
  const expected: string[] = [];
  for (let j = 0; j < samples; j++)
    for (const i of plan.instances) expected.push(sampleKey(i.instance_id, j));
  const { shards, owner } = await planMerge(dirs, expected);
  const first = shards[0]!.report;
  log.info(
    `merging ${plural(shards.length, 'folder')} (${plural(expected.length, 'sample')}) into ${resolve(plan.out)}`,
  );
  return runEvalWith(
    {
      instances: plan.instances,
      out: plan.out,
      samples,
      resume: false,
      overwrite: plan.overwrite,
      dataset: plan.dataset,
      progress: false,
      agent: { name: first.agent, modelName: first.model },
      runtime: { kind: first.runtime },
    },
    async (jobs, { dirs: into, record }) => {
      for (const job of jobs) {
        const key = sampleKey(job.instance.instance_id, job.sample);
        const line = await adoptSample(owner.get(key)!.dir, key, into, 'copy');
        if (line) await record(line);
      }
      return { interrupted: false };
    },
  );
}
