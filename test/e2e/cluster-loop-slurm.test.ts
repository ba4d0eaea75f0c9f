/**
 * `polar loop --cluster slurm --train-nodes 2` on a real Slurm cluster (Debian's slurm-wlm 22.05 and
 * munge, test/support/cluster/slurm.ts: slurmctld on one test host, a slurmd on each of two more, network
 * namespaces), polar on the "login node" (this namespace): one step of real Pi against the vLLM stand-in
 * (on the test network's bridge, where every node reaches it), its 2 tasks x 2 samples as 2 Slurm array
 * shards (one per node, each asking a whole node) and a merge job, graded by a verifier that rewards
 * sample 1 of each task and not sample 0 (every group has an advantage), then build, and the training as
 * one `polar train` across both nodes (srun + srun_torchrun, torchrun's gloo over the veth pair; the
 * transformers worker of .venv on the CPU, a tiny model with the Qwen3 vocabulary), then publish
 * (--reload-cmd). What must hold: the run folder has every entry of a one-machine loop's step (docs/loop.md,
 * "The run folder"), the samples ran on both nodes, the training ran as node 0 and node 1 of 2 on the two
 * nodes, and the step's checkpoint holds finite weights that differ from the starting model's. Bounded:
 * polar has a time limit, the cluster is stopped by pid and the namespaces and folder removed in `after`.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import { findPython } from '../../src/train/env.ts';
import { privateDirs } from '../support/capture-run.ts';
import { nonEmptyLines as lines, readResultLines } from '../support/cluster/compare.ts';
import { runOnCluster } from '../support/cluster/eval.ts';
import { ROOT } from '../support/cluster/ray.ts';
import { SHARD_PER_NODE, slurmUnavailable, useSlurmCluster } from '../support/cluster/slurm.ts';
import { coinLoopArgs, loopEnv, servedPolicy, standinTrainConfig, TINY_LLAMA } from '../support/coin-loop.ts';
import { startStandin } from '../support/vllm-standin.ts';

const python = await findPython(process.env.POLAR_PYTHON).catch(() => null);
const SKIP =
  slurmUnavailable() ??
  (python?.transformers ? null : 'no Python with torch and transformers (npm run setup:python)');

/** A verifier grader: reward 1 for sample 1 of a task, 0 for sample 0 (a group of 2 always differs). */
const VERIFIER = `let t = '';
for await (const c of process.stdin) t += c;
console.log(JSON.parse(t).sample % 2);
`;

describe('polar loop --cluster slurm --train-nodes 2', { skip: SKIP ?? false, timeout: 590_000 }, () => {
  const state = useSlurmCluster('polar-loopslurm-');

  test('one step: rollouts on both nodes, training across both, the run folder a local loop writes', async () => {
    // a private home for the harness, removed with its folder at the end
    const { home } = await privateDirs();
    const standin = await startStandin({ host: state.net.bridgeIp });
    try {
      const verifier = join(state.tmp, 'reward-sample.mjs');
      await writeFile(verifier, VERIFIER);
      const run = join(state.tmp, 'loop');
      const policy = servedPolicy(standin.url, await standinTrainConfig(state.tmp));
      const argv = [
        process.execPath,
        join(ROOT, 'bin/polar'),
        ...coinLoopArgs(policy, { steps: 1, tasksPerStep: 2, lr: '0.001', out: run }, [
          '--grader',
          `${process.execPath} ${verifier}`,
          '--eval-every',
          '0',
          // one shard on each node, one sample at a time
          ...SHARD_PER_NODE,
          '--cluster-memory',
          '256MiB',
          '--train-nodes',
          '2',
        ]),
      ];
      const env = loopEnv(home, python!.executable, { SLURM_CONF: state.slurm.conf });
      const r = await runOnCluster(state.net, argv, env, 480_000);
      assert.equal(r.code, 0, r.stderr);

      // the run folder: every entry a one-machine loop's step has (docs/loop.md)
      const step1 = join(run, 'step-1');
      assert.ok(existsSync(join(run, 'loop.json')));
      const recorded = JSON.parse(readFileSync(join(run, 'loop.json'), 'utf8'));
      assert.deepEqual(recorded.cluster, { engine: 'slurm' });
      assert.equal(recorded.trainNodes.nodes, 2);
      for (const entry of ['eval/report.json', 'eval/results.jsonl', 'traj.jsonl', 'build-stats.json'])
        assert.ok(existsSync(join(step1, entry)), entry);
      const step = JSON.parse(readFileSync(join(step1, 'step.json'), 'utf8'));
      assert.equal(step.status, 'done');
      assert.equal(step.policy, 'step-0');
      assert.equal(step.rollouts.samples, 4);
      assert.equal(step.rollouts.pass_at_1, 0.5, 'the verifier rewarded sample 1 of each task');
      assert.equal(step.trajectories, 4);
      assert.equal(lines(join(step1, 'traj.jsonl')).length, 4);

      // the samples ran on both nodes
      const results = readResultLines(join(step1, 'eval'));
      assert.equal(results.length, 4, 'two tasks x two samples');
      const nodes = new Set(results.map((l) => (l.cluster as { node: string }).node));
      assert.deepEqual([...nodes].sort(), ['n1', 'n2'], r.stderr);

      // the training ran across both nodes, into the step's train/ folder as a local run leaves it
      for (const [k, n] of state.slurm.nodes.entries())
        assert.match(
          r.stderr,
          new RegExp(`srun_torchrun: node ${k} of 2 \\(${n.name}, ${n.host.ip.replaceAll('.', '\\.')}\\)`),
        );
      const train = join(step1, 'train');
      for (const entry of ['config.json', 'metrics.jsonl', 'latest', 'worker.log', 'worker-node1.log'])
        assert.ok(existsSync(join(train, entry)), `train/${entry}`);
      const latest = readFileSync(join(train, 'latest'), 'utf8').trim();
      assert.equal(step.checkpoint, join(train, latest));
      assert.ok(existsSync(join(step.checkpoint, 'model.safetensors')));
      const steps = lines(join(train, 'metrics.jsonl'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((m) => m.event === 'step');
      assert.equal(steps.length, 1, 'one update per loop step');
      assert.ok(Number.isFinite(steps[0]!.loss), `loss ${steps[0]!.loss}`);
      assert.ok(Number(steps[0]!.grad_norm) > 0, `grad_norm ${steps[0]!.grad_norm}`);
      // the checkpoint holds every weight of the tiny model, finite, and not the starting ones
      const compare = await execa(
        python!.executable,
        [
          '-c',
          [
            'import sys, torch',
            'from safetensors.torch import load_file',
            'from polar_train.tiny import build_tiny',
            'start = build_tiny(sys.argv[1]).state_dict()',
            'trained = load_file(sys.argv[2])',
            'assert trained and set(trained) <= set(start), sorted(set(trained) - set(start))',
            'assert all(torch.isfinite(t.float()).all() for t in trained.values()), "non-finite weights"',
            'print(max(float((trained[k].float() - start[k].float()).abs().max()) for k in trained))',
          ].join('\n'),
          TINY_LLAMA,
          join(step.checkpoint, 'model.safetensors'),
        ],
        { reject: false, env: { PYTHONPATH: join(ROOT, 'src/train/worker') } },
      );
      assert.equal(compare.exitCode, 0, compare.stderr);
      assert.ok(Number(compare.stdout.trim()) > 0, `largest weight change ${compare.stdout}`);
      // nothing left by the nodes' launchers outside the step's folders
      assert.deepEqual(
        readdirSync(run)
          .filter((f) => !f.startsWith('.'))
          .sort(),
        ['loop.json', 'step-1'],
      );
    } finally {
      await standin.close();
      rmSync(dirname(home), { recursive: true, force: true });
    }
  });
});
