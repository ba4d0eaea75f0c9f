/**
 * The Slurm launcher of a training run across nodes, on test hosts (network namespaces) with the real
 * engine: `srun -N2 --ntasks-per-node=1 python -m polar_train.cluster.srun_torchrun -- ARGS` on a Slurm
 * cluster of two compute nodes (the Ray launcher: train-ray.test.ts; each file has its time limit). Each node runs
 * `polar train` with its node rank (torchrun, gloo over the veth pair, the rendezvous at the first node);
 * for the same global batch the 2-node update equals the 1-node update within float tolerance, the
 * checkpoint is written once, each node ran on its own host, and the srun run's checkpoint resumed on one
 * node makes the update the 1-node checkpoint makes (it gave NaN weights before checkpoint version 2,
 * docs/train.md). A small learning rate: the tiny model stays finite. Bounded: every process has a time
 * limit; the cluster (useSlurmCluster, shared with the other Slurm files) is stopped by pid and the
 * namespaces removed in `after`.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ROOT } from '../support/cluster/ray.ts';
import { slurmUnavailable, useSlurmCluster } from '../support/cluster/slurm.ts';
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
  'polar train across 2 Slurm nodes: srun, one task per node',
  { skip: probe ? (slurmUnavailable() ?? false) : NO_TORCH, timeout: 590_000 },
  () => {
    const state = useSlurmCluster('polar-srun-train-');

    const one = () => join(state.tmp, 'one');
    const two = () => join(state.tmp, 'two');
    let args: string[] = [];

    test('the 2-node step equals the 1-node step; each node ran on its own host', async () => {
      args = await trainArgs(state.tmp);
      await oneNode(args, one());
      const r = await runIn(
        state.net,
        null,
        [
          'srun',
          '-N2',
          '--ntasks-per-node=1',
          '--cpus-per-task=2',
          `--chdir=${ROOT}`,
          probe!.python,
          '-m',
          'polar_train.cluster.srun_torchrun',
          '--polar',
          POLAR,
          '--',
          ...args,
          '--out',
          two(),
        ],
        { ...state.slurm.env, PYTHONPATH: WORKER, NO_COLOR: '1', POLAR_PYTHON: probe!.python },
      );
      assert.equal(r.code, 0, r.stderr);
      for (const [k, n] of state.slurm.nodes.entries())
        assert.match(
          r.stderr,
          new RegExp(`srun_torchrun: node ${k} of 2 \\(${n.name}, ${n.host.ip.replaceAll('.', '\\.')}\\)`),
        );
      assert.match(r.stderr, /node 0 of 2/);
      assert.match(r.stderr, /node 1 of 2/);
      assert.ok(existsSync(join(two(), 'worker.log')) && existsSync(join(two(), 'worker-node1.log')));
      await assertSameUpdate(probe!.python, one(), two(), 'step-2');
    });

    test("the 2-node checkpoint resumes on one node with the 1-node checkpoint's update", async () => {
      await assertResumesOnOneNode(state.tmp, args, one(), two());
    });
  },
);
