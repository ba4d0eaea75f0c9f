/**
 * The Ray launcher of a training run across nodes, on test hosts (network namespaces) with the real
 * engine: `python -m polar_train.cluster.ray_torchrun --nnodes 2 -- ARGS` (a STRICT_SPREAD placement
 * group, one bundle per node) on a Ray cluster of two workers (the srun launcher: train-srun.test.ts). Each node runs
 * `polar train` with its node rank (torchrun, gloo over the veth pair, the rendezvous at the first node);
 * for the same global batch the 2-node update equals the 1-node update within float tolerance, the
 * checkpoint is written once, each node ran on its own host, and the 2-node checkpoint resumed on one
 * node makes the update the 1-node checkpoint makes. A small learning rate: the tiny model stays finite. Bounded: every process has a time limit, the clusters are stopped by pid and the
 * namespaces removed in `after`.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { RAY_ENV, RAY_SKIP, ROOT, useRayCluster, VENV_PYTHON } from '../support/cluster/ray.ts';
import { assertSameUpdate } from '../support/cluster/train-compare.ts';
import {
  assertResumesOnOneNode,
  oneNode,
  POLAR,
  probe,
  runIn,
  trainArgs,
  WORKER,
} from '../support/cluster/train-run.ts';
import { NO_TORCH } from '../unit/train/fixtures.ts';

describe(
  'polar train across 2 Ray nodes: a STRICT_SPREAD placement group, one bundle per node',
  { skip: probe ? (RAY_SKIP ?? false) : NO_TORCH, timeout: 590_000 },
  () => {
    const c = useRayCluster('polar-ray-train-');

    const one = () => join(c.tmp, 'one');
    const two = () => join(c.tmp, 'two');
    let args: string[] = [];

    test('the 2-node step equals the 1-node step; the bundles on the two workers', async () => {
      args = await trainArgs(c.tmp);
      await oneNode(args, one());
      const r = await runIn(
        c.net,
        c.ray.head.name,
        [
          VENV_PYTHON,
          '-m',
          'polar_train.cluster.ray_torchrun',
          '--address',
          c.ray.address,
          '--nnodes',
          '2',
          '--cpus',
          '1',
          '--polar',
          POLAR,
          '--cwd',
          ROOT,
          '--',
          ...args,
          '--out',
          two(),
        ],
        { ...RAY_ENV, PYTHONPATH: WORKER, NO_COLOR: '1', POLAR_PYTHON: probe!.python },
      );
      assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
      const events = r.stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const placed = events.find((e) => e.event === 'nodes') as { nodes: Array<{ ip: string }> };
      assert.deepEqual(
        placed.nodes.map((n) => n.ip).sort(),
        c.ray.workers.map((w) => w.ip).sort(),
        'one bundle on each worker',
      );
      const finished = events.filter((e) => e.event === 'node');
      assert.equal(finished.length, 2);
      for (const e of finished) assert.equal(e.exit_code, 0, String(e.stderr_tail));
      assert.deepEqual(events.at(-1), { event: 'done', ok: true });
      assert.ok(existsSync(join(two(), 'worker.log')) && existsSync(join(two(), 'worker-node1.log')));
      await assertSameUpdate(probe!.python, one(), two(), 'step-2');
    });

    test("the 2-node checkpoint resumes on one node with the 1-node checkpoint's update", async () => {
      await assertResumesOnOneNode(c.tmp, args, one(), two());
    });
  },
);
