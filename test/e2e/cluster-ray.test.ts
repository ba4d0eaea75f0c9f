/**
 * `polar eval --cluster ray` on a real Ray cluster of three test hosts (network namespaces): a head and
 * two workers with 2 polar_slot each, the gold agent (fixed cost) on the fixture rows. The run's folder
 * equals a one-machine run's but for timings and node names (a worker killed mid-run: cluster-ray-kill). The driver runs where a user runs it, on the head node. Bounded: every polar run has a
 * time limit, the cluster is stopped by pid and the namespaces removed in `after`, whatever happened.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { readResultLines, runView } from '../support/cluster/compare.ts';
import { goldEvalArgs, goldIds, localGoldRun } from '../support/cluster/eval.ts';
import { evalOnHead, RAY_SKIP, ROOT, useRayCluster } from '../support/cluster/ray.ts';

describe('polar eval --cluster ray', { skip: RAY_SKIP ?? false, timeout: 590_000 }, () => {
  const c = useRayCluster('polar-ray-');

  test('samples spread over the workers; the folder is a one-machine run but for timings and nodes', async () => {
    const ids = goldIds();
    const local = localGoldRun(join(c.tmp, 'local'), ids, 2);
    const r = await evalOnHead(c.net, c.ray, [
      ...goldEvalArgs(ids, 2),
      '--cluster',
      `ray=${c.ray.address}`,
      '--out',
      join(c.tmp, 'ray-run'),
    ]);
    assert.equal(r.code, 0, r.stderr);
    const lines = readResultLines(join(c.tmp, 'ray-run'));
    assert.equal(lines.length, ids.length * 2);
    const nodes = new Set(lines.map((l) => (l.cluster as { node: string }).node));
    assert.ok(nodes.size >= 2, `samples ran on ${[...nodes].join(', ')}`);
    for (const node of nodes)
      assert.ok(
        c.ray.workers.some((w: { ip: string }) => w.ip === node),
        `${node} is a worker`,
      );
    assert.deepEqual(runView(join(c.tmp, 'ray-run')), runView(local));
    // polar build reads it as any run folder
    const build = spawnSync(
      process.execPath,
      [join(ROOT, 'bin/polar'), 'build', join(c.tmp, 'ray-run', 'captures'), '-o', join(c.tmp, 'traj.jsonl')],
      { cwd: ROOT, encoding: 'utf8' },
    );
    assert.ok(build.status === 0 || /no sessions|no capture/i.test(build.stderr), build.stderr);
  });
});
