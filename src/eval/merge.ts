/**
 * `polar eval --merge DIR... --dataset D --out OUT`: the run folders of a sharded run (`--shard i/n`, one
 * per CI matrix job, say) merged into the folder one machine would have written
 * (src/rollout/executors/merge.ts); the selection the shards were run with comes from the flags.
 */
import { UsageError } from '../errors.ts';
import { mergeRuns } from '../rollout/executors/merge.ts';
import { finish } from './finish.ts';
import type { EvalFlags } from './flags.ts';
import { selectedInstances } from './job.ts';

export async function mergeCommand(f: EvalFlags): Promise<number> {
  const dirs = f.merge ?? [];
  if (dirs.length === 0) throw new UsageError('--merge needs the run folders to merge');
  if (f.cluster || f.shard)
    throw new UsageError('--merge takes no --cluster or --shard: it merges finished runs');
  const { instances } = await selectedInstances(f);
  const outcome = await mergeRuns(dirs, {
    instances,
    samples: f.samples,
    out: f.out,
    dataset: f.dataset,
    overwrite: Boolean(f.overwrite),
  });
  return finish(f, outcome);
}
