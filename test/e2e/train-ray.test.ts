/**
 * The Ray launcher of a training run across nodes, on test hosts (network namespaces) with the real
 * engine: `python -m polar_train.cluster.ray_torchrun --nnodes 2 -- ARGS` (a STRICT_SPREAD placement
 * group, one bundle per node) on a Ray cluster of two workers (the srun launcher: train-srun.test.ts). Each node runs
 * `polar train` with its node rank (torchrun, gloo over the veth pair, the rendezvous at the first node);
 * for the same global batch the 2-node update equals the 1-node update within float tolerance, the
 * checkpoint is written once, and each node ran on its own host. A small learning rate: the tiny model
 * stays finite. Bounded: every process has a time limit, the clusters are stopped by pid and the
 * namespaces removed in `after`.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import type { TestNet } from '../support/cluster/netns.ts';
import { RAY_ENV, RAY_SKIP, ROOT, useRayCluster, VENV_PYTHON } from '../support/cluster/ray.ts';
import { assertSameUpdate } from '../support/cluster/train-compare.ts';
import {
  madeUpLogprobs,
  NO_TORCH,
  pythonWithTorch,
  smallBatch,
  TINY,
  writeJsonl,
} from '../unit/train/fixtures.ts';

const probe = await pythonWithTorch();
const BIN = join(ROOT, 'bin/polar');
const POLAR = `${process.execPath} ${BIN}`;
const WORKER = join(ROOT, 'src/train/worker');

/** The training run's flags (less --out), its batch and train.json written into `dir`. */
async function trainArgs(dir: string): Promise<string[]> {
  const traj = await writeJsonl(join(dir, 'traj.jsonl'), smallBatch());
  // smallBatch's logprobs are made up: the sampling check is off (train.json)
  const config = await madeUpLogprobs(dir);
  return [
    traj,
    '--config',
    config,
    '--model',
    TINY,
    '--device',
    'cpu',
    '--batch-rollouts',
    '4',
    '--lr',
    '0.001',
  ];
}

/** The same run on one node (this machine), the reference. */
async function oneNode(args: string[], out: string): Promise<void> {
  const r = await execa(process.execPath, [BIN, 'train', ...args, '--out', out], {
    reject: false,
    env: { NO_COLOR: '1', POLAR_PYTHON: probe!.python },
    timeout: 300_000,
  });
  assert.equal(r.exitCode, 0, r.stderr);
}

/** argv in `ns` (a namespace, or this one when null); its exit code, stdout and stderr; killed after limitMs. */
function run(
  net: TestNet,
  ns: string | null,
  argv: string[],
  env: NodeJS.ProcessEnv,
  limitMs = 400_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const full = ns ? ['ip', 'netns', 'exec', ns, ...argv] : argv;
    const child = spawn(full[0]!, full.slice(1), { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    net.children.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d;
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe(
  'polar train across 2 Ray nodes: a STRICT_SPREAD placement group, one bundle per node',
  { skip: probe ? (RAY_SKIP ?? false) : NO_TORCH, timeout: 590_000 },
  () => {
    const c = useRayCluster('polar-ray-train-');

    test('the 2-node step equals the 1-node step; the bundles on the two workers', async () => {
      const args = await trainArgs(c.tmp);
      const one = join(c.tmp, 'one');
      await oneNode(args, one);
      const two = join(c.tmp, 'two');
      const r = await run(
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
          two,
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
      assert.ok(existsSync(join(two, 'worker.log')) && existsSync(join(two, 'worker-node1.log')));
      await assertSameUpdate(probe!.python, one, two, 'step-2');
    });
  },
);
