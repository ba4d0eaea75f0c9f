/**
 * `npm run bench -- cluster`: samples per second of `polar eval --cluster ray` on 1, 2 and 3 worker nodes
 * (2 polar_slot each, network namespaces on this machine: test/support/cluster), with the gold agent as a
 * stand-in of fixed cost per sample (apply the fix, run the tests), the scaling efficiency against one
 * node, and the per-sample overhead of the Ray path against the same samples on one machine (`polar eval`
 * at --concurrency 2, one node's slots). All "nodes" share this machine's cores: the scaling measured here
 * is a floor, and figures taken while other work loads the machine are provisional.
 */

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ensureFixtureRepos } from '../scripts/swe-fixtures.ts';
import { readResultLines } from '../test/support/cluster/compare.ts';
import { netnsUnavailable, TestNet } from '../test/support/cluster/netns.ts';
import { addWorker, evalOnHead, rayUnavailable, startRay } from '../test/support/cluster/ray.ts';

const ROOT = resolve(import.meta.dirname, '..');
const MINI = join(ROOT, 'fixtures/swe/mini.jsonl');

export async function benchCluster(): Promise<void> {
  const why = netnsUnavailable() ?? rayUnavailable();
  if (why) {
    console.log(`cluster: skipped (${why})`);
    return;
  }
  ensureFixtureRepos();
  const samples = Number(process.env.POLAR_BENCH_CLUSTER_SAMPLES ?? 3);
  const ids = 'polar-fixtures__textkit-1,polar-fixtures__textkit-2';
  const total = 2 * samples;
  const run = [
    '--dataset',
    MINI,
    '--agent',
    'gold',
    '--runtime',
    'local',
    '--instances',
    ids,
    '--samples',
    String(samples),
  ];
  const tmp = mkdtempSync(join(tmpdir(), 'polar-bench-cluster-'));
  console.log(
    `cluster: load average ${loadavg()[0]!.toFixed(1)} at the start (figures under load are provisional)`,
  );
  const t0 = performance.now();
  const local = spawnSync(
    process.execPath,
    [join(ROOT, 'bin/polar'), 'eval', ...run, '--concurrency', '2', '--out', join(tmp, 'local'), '-q'],
    { cwd: ROOT },
  );
  const localS = (performance.now() - t0) / 1000;
  if (local.status !== 0) throw new Error(`one-machine run failed: ${local.stderr}`);
  console.log(
    `baseline: one machine, --concurrency 2: ${total} samples in ${localS.toFixed(1)} s = ${(total / localS).toFixed(3)} samples/s`,
  );
  const net = TestNet.create(4);
  try {
    const ray = await startRay(net, join(tmp, 'ray'), { slots: 2, workers: 1 });
    const rates: number[] = [];
    for (let nodes = 1; nodes <= 3; nodes++) {
      if (nodes > 1) await addWorker(net, ray, net.nodes[nodes]!, join(tmp, 'ray'));
      const out = join(tmp, `ray-${nodes}`);
      const started = performance.now();
      const r = await evalOnHead(
        net,
        ray,
        [...run, '--cluster-memory', '256MiB', '--cluster', `ray=${ray.address}`, '--out', out, '-q'],
        900_000,
      );
      const s = (performance.now() - started) / 1000;
      if (r.code !== 0) throw new Error(`ray run on ${nodes} nodes failed: ${r.stderr.slice(-500)}`);
      const used = new Set(readResultLines(out).map((l) => (l.cluster as { node: string }).node)).size;
      rates.push(total / s);
      const eff = rates[nodes - 1]! / (nodes * rates[0]!);
      console.log(
        `ray, ${nodes} worker node${nodes > 1 ? 's' : ''} (${used} used): ${total} samples in ${s.toFixed(1)} s = ${(total / s).toFixed(3)} samples/s, scaling efficiency ${(eff * 100).toFixed(0)}%`,
      );
      if (nodes === 1)
        console.log(
          `ray path overhead per sample against one machine at the same 2 slots: ${(((s - localS) / total) * 2).toFixed(2)} s (${(s / localS).toFixed(2)}x the one-machine wall time)`,
        );
    }
  } finally {
    net.destroySync();
    rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) await benchCluster();
