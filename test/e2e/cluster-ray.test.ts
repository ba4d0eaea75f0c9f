/**
 * `polar eval --cluster ray` on a real Ray cluster of three test hosts (network namespaces): a head and
 * two workers with 2 polar_slot each, the gold agent (fixed cost) on the fixture rows. The run's folder
 * equals a one-machine run's but for timings and node names (a worker killed mid-run: cluster-ray-kill). The driver runs where a user runs it, on the head node. Bounded: every polar run has a
 * time limit, the cluster is stopped by pid and the namespaces removed in `after`, whatever happened.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readResultLines, runView } from '../support/cluster/compare.ts';
import { netnsUnavailable, TestNet } from '../support/cluster/netns.ts';
import { evalOnHead, type RayCluster, ROOT, rayUnavailable, startRay } from '../support/cluster/ray.ts';
import { fixtures, localEval, MINI, runnableIds } from '../unit/eval/helpers.ts';

const SKIP = netnsUnavailable() ?? rayUnavailable();

describe('polar eval --cluster ray', { skip: SKIP ?? false, timeout: 590_000 }, () => {
  let net: TestNet;
  let ray: RayCluster;
  let tmp: string;
  const ids = () => runnableIds().slice(0, 2);

  before(async () => {
    fixtures();
    tmp = mkdtempSync(join(tmpdir(), 'polar-ray-'));
    net = TestNet.create(3);
    ray = await startRay(net, join(tmp, 'ray'), { slots: 2 });
  });
  after(async () => {
    await net?.destroy();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  test('samples spread over the workers; the folder is a one-machine run but for timings and nodes', async () => {
    const common = [
      '--dataset',
      MINI,
      '--agent',
      'gold',
      '--runtime',
      'local',
      '--instances',
      ids().join(','),
      '--samples',
      '2',
      '--cluster-memory',
      '256MiB',
    ];
    const local = localEval('gold', join(tmp, 'local'), ['--instances', ids().join(','), '--samples', '2']);
    assert.equal(local.code, 0, local.stderr);
    const r = await evalOnHead(net, ray, [
      ...common,
      '--cluster',
      `ray=${ray.address}`,
      '--out',
      join(tmp, 'ray-run'),
    ]);
    assert.equal(r.code, 0, r.stderr);
    const lines = readResultLines(join(tmp, 'ray-run'));
    assert.equal(lines.length, ids().length * 2);
    const nodes = new Set(lines.map((l) => (l.cluster as { node: string }).node));
    assert.ok(nodes.size >= 2, `samples ran on ${[...nodes].join(', ')}`);
    for (const node of nodes)
      assert.ok(
        ray.workers.some((w) => w.ip === node),
        `${node} is a worker`,
      );
    assert.deepEqual(runView(join(tmp, 'ray-run')), runView(join(tmp, 'local')));
    // polar build reads it as any run folder
    const build = spawnSync(
      process.execPath,
      [join(ROOT, 'bin/polar'), 'build', join(tmp, 'ray-run', 'captures'), '-o', join(tmp, 'traj.jsonl')],
      { cwd: ROOT, encoding: 'utf8' },
    );
    assert.ok(build.status === 0 || /no sessions|no capture/i.test(build.stderr), build.stderr);
  });
});
