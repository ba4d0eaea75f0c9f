/**
 * `polar eval --cluster slurm` on a real Slurm (Debian's slurm-wlm 22.05 and munge, installed by
 * .ci/run): slurmctld on one test host, a slurmd on each of two more (network namespaces), munged, all
 * started by the test in its own temporary folder and killed by pid in `after`. The gold agent (fixed
 * cost) on fixture rows: from a login node (sbatch --array + a merge job), and from inside an allocation
 * (salloc: the shards are the tasks of one srun step). Each run's folder equals a one-machine run's but
 * for timings and node names.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { readResultLines, runView } from '../support/cluster/compare.ts';
import { goldEvalArgs, goldIds, localGoldRun, POLAR_EVAL, runOnCluster } from '../support/cluster/eval.ts';
import type { TestNet } from '../support/cluster/netns.ts';
import {
  SHARD_PER_NODE,
  type SlurmCluster,
  slurmUnavailable,
  useSlurmCluster,
} from '../support/cluster/slurm.ts';

const SKIP = slurmUnavailable();

/** Runs argv (a polar eval, or salloc around one) with the cluster's SLURM_CONF; killed after `limitMs`. */
const run = (net: TestNet, c: SlurmCluster, argv: string[], limitMs = 300_000) =>
  runOnCluster(net, argv, c.env, limitMs);

describe('polar eval --cluster slurm', { skip: SKIP ?? false, timeout: 590_000 }, () => {
  const state = useSlurmCluster('polar-slurm-');
  const ids = goldIds;
  const polar = POLAR_EVAL;
  // one shard per node
  const common = () => [...goldEvalArgs(ids(), 2), ...SHARD_PER_NODE];
  let local = '';
  const localRun = () => {
    local ||= localGoldRun(join(state.tmp, 'local'), ids(), 2);
    return local;
  };
  const checkRun = (out: string, stderr: string) => {
    const lines = readResultLines(out);
    assert.equal(lines.length, ids().length * 2);
    const tags = lines.map(
      (l) => l.cluster as { engine: string; node: string; job_id: string; shard: number },
    );
    for (const t of tags) assert.equal(t.engine, 'slurm');
    const nodes = new Set(tags.map((t) => t.node));
    assert.deepEqual([...nodes].sort(), ['n1', 'n2'], stderr);
    assert.deepEqual(new Set(tags.map((t) => t.shard)), new Set([1, 2]));
    assert.deepEqual(runView(out), runView(localRun()));
  };

  test('from a login node: an array job per shard and a merge job; the folder is a one-machine run', async () => {
    const out = join(state.tmp, 'array-run');
    const r = await run(state.net, state.slurm, [...polar, ...common(), '--out', out]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /array job \d+ \(2 shards\) and merge job \d+/);
    checkRun(out, r.stderr);
    assert.ok(existsSync(join(out, '.cluster', 'slurm', 'merge.log')));
    assert.equal(readFileSync(join(out, '.cluster', 'slurm', 'merge.exit'), 'utf8').trim(), '0');
  });

  test('shards that fail: the merge job is cancelled, the error names the shards and their log', async () => {
    const out = join(state.tmp, 'failed-run');
    // every shard's polar is `false`: it exits 1 at once, on its node
    const r = await run(state.net, state.slurm, [
      ...polar,
      ...common(),
      '--cluster-polar',
      'false',
      '--out',
      out,
    ]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /2 shards failed \(shard 1, shard 2\), the merge job \d+ will not run/);
    assert.match(r.stderr, /--resume/);
    assert.equal(existsSync(join(out, 'report.json')), false);
    assert.equal(readFileSync(join(out, '.cluster', 'slurm', 'shard-1.exit'), 'utf8').trim(), '1');
  });

  test('inside an allocation (salloc -N2): the shards are the tasks of one srun step', async () => {
    const out = join(state.tmp, 'steps-run');
    const r = await run(state.net, state.slurm, [
      'salloc',
      '-N2',
      '--ntasks-per-node=1',
      '--cpus-per-task=2',
      ...polar,
      ...common(),
      '--out',
      out,
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /inside job \d+ \(2 nodes\)/);
    checkRun(out, r.stderr);
  });
});
