/**
 * A sample's files taken into a run folder: what a cluster node (or a shard of a run) wrote in its own
 * folder, under the names a one-machine run uses (EVAL_FILES): the capture with its grading record
 * (and any set-aside captures of the same sample), the patch, the logs. The result line's paths are
 * rewritten to the run folder, so `polar build DIR` and `polar inspect` read it as they read any run.
 */
import { existsSync, readdirSync } from 'node:fs';
import { copyFile, rename, rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { mkdirPrivate } from '../../util/private-files.ts';
import { EVAL_FILES } from '../run/files.ts';
import type { ResultLine } from '../run/report.ts';
import { readResults } from '../run/results.ts';
import type { EvalDirs, SampleJob } from '../run/run.ts';

/** The files of sample `key` in a run folder: captures/<key>.jsonl*, patches/<key>.diff, logs/<key>.* */
function sampleFiles(dir: string, key: string): Array<{ folder: keyof EvalDirs; name: string }> {
  const found: Array<{ folder: keyof EvalDirs; name: string }> = [];
  for (const folder of ['captures', 'patches', 'logs'] as const) {
    const path = join(dir, EVAL_FILES[folder]);
    if (!existsSync(path)) continue;
    for (const name of readdirSync(path)) {
      if (name.startsWith(`${key}.`)) found.push({ folder, name });
    }
  }
  return found;
}

/** Moves (or copies) one file across folders, over a file of the same name. */
async function carry(from: string, to: string, how: 'move' | 'copy'): Promise<void> {
  if (how === 'copy') return copyFile(from, to);
  try {
    await rename(from, to);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
    await copyFile(from, to); // another file system (a shared path): copy, then drop the original
    await rm(from, { force: true });
  }
}

/**
 * Takes sample `key` of the run folder `from` into `dirs`; returns its result line with the paths of
 * `dirs`, or null when `from` holds no result for it (the sample did not finish there).
 */
export async function adoptSample(
  from: string,
  key: string,
  dirs: EvalDirs,
  how: 'move' | 'copy' = 'move',
): Promise<ResultLine | null> {
  const line = (await readResults(join(from, EVAL_FILES.results))).get(key);
  if (!line) return null;
  for (const { folder, name } of sampleFiles(from, key)) {
    await mkdirPrivate(dirs[folder]);
    await carry(join(from, EVAL_FILES[folder], name), join(dirs[folder], name), how);
  }
  return {
    ...line,
    // the same file name (an errored sample's set-aside capture keeps its own), in this run's folder
    capture: typeof line.capture === 'string' ? join(dirs.captures, basename(line.capture)) : null,
    patch_file: join(dirs.patches, `${key}.diff`),
  };
}

/** The result of a sample that never finished anywhere (its node lost too often, polar failed there). */
export function lostSample(
  job: SampleJob,
  reason: string,
  agent: { name: string; modelName: string },
): ResultLine {
  return {
    instance_id: job.instance.instance_id,
    repo: job.instance.repo,
    sample: job.sample,
    status: 'error',
    resolved: false,
    // an infrastructure failure: no reward, no grading record; --resume runs it again
    reward: null,
    reason,
    suspicious: false,
    agent: { name: agent.name, status: 'error', error: reason, calls: 0, failed_calls: 0 },
    durations_ms: { total: 0, agent: 0, tests: 0, overhead: 0 },
    capture: null,
    patch_file: null,
    model_name_or_path: agent.modelName,
    model_patch_bytes: 0,
    finished_at: new Date().toISOString(),
  };
}
