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
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ensureFixtureRepos } from '../../scripts/swe-fixtures.ts';
import { readResultLines, runView } from '../support/cluster/compare.ts';
import { TestNet } from '../support/cluster/netns.ts';
import { type SlurmCluster, slurmUnavailable, startSlurm } from '../support/cluster/slurm.ts';
import { tempDir } from '../support/temp.ts';
import { localEval, MINI, ROOT, runnableIds } from '../unit/eval/helpers.ts';

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
    const state = {} as { net: TestNet; slurm: SlurmCluster; tmp: string };
    before(async () => {
      ensureFixtureRepos();
      state.tmp = tempDir('polar-slurm-kill-');
      state.net = TestNet.create(3);
      state.slurm = await startSlurm(state.net, join(state.tmp, 'slurm'), { nodes: 2, cpus: 2 });
    });
    after(async () => {
      await state.net?.destroy();
      if (state.tmp) rmSync(state.tmp, { recursive: true, force: true });
    });

    test('a node killed mid-shard: the shard is requeued on the other node and resumes', async () => {
      const ids = runnableIds().slice(0, 2);
      const out = join(state.tmp, 'kill-run');
      const victim = state.slurm.nodes.find((n) => n.name === 'n2')!;
      let killed = false;
      // two shards of 3 samples, each asking a whole node (2 CPUs): one shard per node, one sample at a time
      const argv = [
        process.execPath,
        join(ROOT, 'bin/polar'),
        'eval',
        '--dataset',
        MINI,
        '--agent',
        'gold',
        '--runtime',
        'local',
        '--instances',
        ids.join(','),
        '--samples',
        '3',
        '--cluster',
        'slurm',
        '--cluster-shards',
        '2',
        '--cluster-cpus',
        '2',
        '--cluster-memory',
        '256MiB',
        '--concurrency',
        '1',
        '--out',
        out,
      ];
      const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(argv[0]!, argv.slice(1), {
          cwd: ROOT,
          env: state.slurm.env,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        state.net.children.push(child);
        let stderr = '';
        child.stderr.on('data', (d: Buffer) => {
          stderr += d;
        });
        child.stdout.resume();
        // at n2's first finished sample its shard has two more to run: the node dies then
        const watch = setInterval(() => {
          if (!killed && shardNodes(out).includes(victim.name)) {
            killed = true;
            state.net.killNode(victim.host);
          }
        }, 250);
        const timer = setTimeout(() => child.kill('SIGKILL'), 480_000);
        child.on('close', (code) => {
          clearInterval(watch);
          clearTimeout(timer);
          resolve({ code, stderr });
        });
      });
      assert.ok(killed, `n2 was killed during the run\n${r.stderr}`);
      assert.equal(r.code, 0, r.stderr);

      const lines = readResultLines(out);
      const keys = lines.map((l) => `${l.instance_id}/${l.sample}`);
      assert.equal(new Set(keys).size, keys.length, 'no sample twice');
      assert.equal(keys.length, ids.length * 3, 'no sample lost');
      assert.ok(
        lines.every((l) => l.status !== 'error'),
        'an infrastructure loss is never a score',
      );
      const nodes = lines.map((l) => (l.cluster as { node: string }).node);
      assert.ok(nodes.includes('n2'), 'what n2 finished before it died is kept');
      assert.ok(
        nodes.filter((n) => n === 'n1').length > 3,
        `the rest of n2's shard ran on n1: ${nodes.join(', ')}`,
      );
      const local = join(state.tmp, 'local');
      const l = localEval('gold', local, ['--instances', ids.join(','), '--samples', '3']);
      assert.equal(l.code, 0, l.stderr);
      assert.deepEqual(runView(out), runView(local));
    });
  },
);
