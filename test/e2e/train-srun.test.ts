/**
 * The Slurm launcher of a training run across nodes, on test hosts (network namespaces) with the real
 * engine: `srun -N2 --ntasks-per-node=1 python -m polar_train.cluster.srun_torchrun -- ARGS` on a Slurm
 * cluster of two compute nodes (the Ray launcher: train-ray.test.ts; each file has its time limit). Each node runs
 * `polar train` with its node rank (torchrun, gloo over the veth pair, the rendezvous at the first node);
 * for the same global batch the 2-node update equals the 1-node update within float tolerance, the
 * checkpoint is written once, and each node ran on its own host. The srun run's checkpoint resumed on one
 * node should make the update the 1-node checkpoint makes: today it gives NaN weights (a todo test). A small learning rate: the tiny model
 * stays finite. Bounded: every process has a time limit, the clusters are stopped by pid and the
 * namespaces removed in `after`.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { execa } from 'execa';
import { TestNet } from '../support/cluster/netns.ts';
import { ROOT } from '../support/cluster/ray.ts';
import { type SlurmCluster, slurmUnavailable, startSlurm } from '../support/cluster/slurm.ts';
import { assertSameUpdate } from '../support/cluster/train-compare.ts';
import { tempDir } from '../support/temp.ts';
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

/** The last step-N checkpoint folder of a run. */
function latestCheckpoint(out: string): string {
  const steps = readdirSync(out)
    .map((n) => /^step-(\d+)$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]));
  assert.ok(steps.length > 0, `no checkpoint in ${out}`);
  return `step-${Math.max(...steps)}`;
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
  'polar train across 2 Slurm nodes: srun, one task per node',
  { skip: probe ? (slurmUnavailable() ?? false) : NO_TORCH, timeout: 590_000 },
  () => {
    const state = {} as { net: TestNet; slurm: SlurmCluster; tmp: string };
    before(async () => {
      state.tmp = tempDir('polar-srun-train-');
      state.net = TestNet.create(3);
      state.slurm = await startSlurm(state.net, join(state.tmp, 'slurm'), { nodes: 2, cpus: 2 });
    });
    after(async () => {
      await state.net?.destroy();
      if (state.tmp) rmSync(state.tmp, { recursive: true, force: true });
    });

    const one = () => join(state.tmp, 'one');
    const two = () => join(state.tmp, 'two');
    let args: string[] = [];

    test('the 2-node step equals the 1-node step; each node ran on its own host', async () => {
      args = await trainArgs(state.tmp);
      await oneNode(args, one());
      const r = await run(
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

    // KNOWN DEFECT, found by this test: the checkpoint a run across nodes (FSDP) writes, resumed on one
    // process, gives all-NaN weights after one step, while the step's metrics match (the optimizer state
    // FSDP.optim_state_dict saves, checkpoint.py, loaded without FSDP). todo: reported, not failing the
    // suite, until the trainer's restore is fixed; then drop the todo.
    test(
      "the 2-node checkpoint resumes on one node with the 1-node checkpoint's update",
      {
        todo: 'FSDP checkpoint resumed on one process: NaN weights (checkpoint.py restore)',
      },
      async () => {
        assert.ok(existsSync(join(two(), 'step-2')), 'the 2-node run wrote its checkpoint');
        // a new trajectory file, as the loop's next step has (the same file would resume at its end); one
        // step: the tiny model on made-up logprobs goes non-finite by its fourth
        const next = await writeJsonl(join(state.tmp, 'traj-next.jsonl'), smallBatch().reverse());
        const resumedArgs = [next, ...args.slice(1), '--max-steps', '1'];
        const more = (from: string) => join(state.tmp, `${from.split('/').at(-1)}-resumed`);
        await oneNode([...resumedArgs, '--resume-from', one()], more(one()));
        await oneNode([...resumedArgs, '--resume-from', two()], more(two()));
        assert.equal(latestCheckpoint(more(one())), 'step-3', 'the resumed run made its step');
        await assertSameUpdate(probe!.python, more(one()), more(two()), 'step-3');
      },
    );
  },
);
