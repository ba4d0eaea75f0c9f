/**
 * `polar eval --cluster slurm` when a compute node dies mid-run (every process of its namespace killed by
 * pid: its slurmd and the shard running there): Slurm marks the node down and requeues the shard's array
 * task (`--requeue`), which runs again on the other node with `--resume`: the samples the dead node had
 * finished are kept, the one it was running runs again, the merge job runs, and the merged folder equals
 * a one-machine run's but for timings and node names: nothing lost, nothing counted twice, no error
 * scored. Own file (and cluster): each file has its time limit. Bounded: the run has a time limit, the
 * daemons are stopped by pid and the namespaces removed in `after`.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { assertEachSampleOnce, readResultLines, runView } from '../support/cluster/compare.ts';
import { goldEvalArgs, goldIds, localGoldRun, POLAR_EVAL, runOnCluster } from '../support/cluster/eval.ts';
import { SHARD_PER_NODE, slurmUnavailable, useSlurmCluster } from '../support/cluster/slurm.ts';

/** The nodes of the shards' finished samples so far (each shard folder's results.jsonl). */
function shardNodes(out: string): string[] {
  const nodes: string[] = [];
  for (const shard of ['shard-1', 'shard-2']) {
    const file = join(out, '.cluster', 'shards', shard, 'results.jsonl');
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      try {
        nodes.push(String((JSON.parse(line) as { cluster?: { node?: string } }).cluster?.node));
      } catch {
        // a line being written
      }
    }
  }
  return nodes;
}

describe(
  'polar eval --cluster slurm, a node lost',
  { skip: slurmUnavailable() ?? false, timeout: 590_000 },
  () => {
    const state = useSlurmCluster('polar-slurm-kill-');

    test('a node killed mid-shard: the shard is requeued on the other node and resumes', async () => {
      const ids = goldIds();
      const out = join(state.tmp, 'kill-run');
      const victim = state.slurm.nodes.find((n) => n.name === 'n2')!;
      let killed = false;
      // two shards of 3 samples, one on each node, one sample at a time
      const argv = [...POLAR_EVAL, ...goldEvalArgs(ids, 3), ...SHARD_PER_NODE, '--out', out];
      // at n2's first finished sample its shard has two more to run: the node dies then
      const watch = setInterval(() => {
        if (!killed && shardNodes(out).includes(victim.name)) {
          killed = true;
          state.net.killNode(victim.host);
        }
      }, 250);
      const r = await runOnCluster(state.net, argv, state.slurm.env, 480_000).finally(() =>
        clearInterval(watch),
      );
      assert.ok(killed, `n2 was killed during the run\n${r.stderr}`);
      assert.equal(r.code, 0, r.stderr);

      const lines = readResultLines(out);
      assertEachSampleOnce(lines, ids.length * 3);
      const nodes = lines.map((l) => (l.cluster as { node: string }).node);
      assert.ok(nodes.includes('n2'), 'what n2 finished before it died is kept');
      assert.ok(
        nodes.filter((n) => n === 'n1').length > 3,
        `the rest of n2's shard ran on n1: ${nodes.join(', ')}`,
      );
      assert.deepEqual(runView(out), runView(localGoldRun(join(state.tmp, 'local'), ids, 3)));
    });
  },
);
