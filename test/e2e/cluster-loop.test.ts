/**
 * `polar loop --cluster ray --train-nodes 2` on a real Ray cluster of three test hosts (network
 * namespaces: a head and two workers with 2 polar_slot each): one step of real Pi against the vLLM
 * stand-in (listening on the test network's bridge, where every node reaches it), the step's rollouts one
 * Ray task per sample, then build, train across both workers (ray_torchrun: a STRICT_SPREAD bundle per
 * worker, torchrun's gloo over the veth pair; the transformers worker of .venv, CPU, a tiny model with the
 * Qwen3 vocabulary) and publish (--reload-cmd). The same loop on this machine alone (trained here) is the
 * reference: the step's records (step.json's fields, the eval folder's files, the session meta that names
 * the policy, the trajectories) are the same but for timings, rewards (the coin-flip tasks) and where the
 * samples ran; the cluster's samples ran on both workers, and its training on both. Bounded: each polar
 * run has a time limit, the cluster is stopped by pid and the namespaces removed in `after`, whatever
 * happened.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { findPython } from '../../src/train/env.ts';
import { privateDirs } from '../support/capture-run.ts';
import { runPolar } from '../support/cli.ts';
import { nonEmptyLines as lines, readResultLines, runView } from '../support/cluster/compare.ts';
import { polarOnHead, RAY_ENV, RAY_SKIP, ROOT, useRayCluster } from '../support/cluster/ray.ts';
import { coinLoopArgs, loopEnv, servedPolicy, standinTrainConfig } from '../support/coin-loop.ts';
import { startStandin } from '../support/vllm-standin.ts';

const python = await findPython(process.env.POLAR_PYTHON).catch(() => null);
const SKIP =
  RAY_SKIP ?? (python?.transformers ? null : 'no Python with torch and transformers (npm run setup:python)');

/** The session records of a step's captures (first line of each file). */
function sessions(evalDir: string): Array<Record<string, unknown>> {
  const dir = join(evalDir, 'captures');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8').split('\n')[0]!) as Record<string, unknown>);
}

describe('polar loop --cluster ray --train-nodes 2', { skip: SKIP ?? false, timeout: 590_000 }, () => {
  const c = useRayCluster('polar-loopray-');

  test('a step whose rollouts ran on both workers writes the records a local loop writes', async () => {
    // a private home for the harness, removed with its folder at the end
    const { home } = await privateDirs();
    const standin = await startStandin({ host: c.net.bridgeIp });
    try {
      const policy = servedPolicy(standin.url, await standinTrainConfig(c.tmp));
      const args = (out: string) =>
        coinLoopArgs(policy, { steps: 1, tasksPerStep: 2, lr: '0.001', concurrency: 2, out }, [
          '--eval-every',
          '0',
          '--grade-empty-patches',
        ]);
      const env = loopEnv(
        home,
        python!.executable,
        Object.fromEntries(Object.entries(RAY_ENV).filter(([k]) => k.startsWith('RAY_'))) as Record<
          string,
          string
        >,
      );

      // the local loop (the reference) and the cluster's at once: the stand-in serves both
      const localRun = join(c.tmp, 'local-loop');
      const clusterRun = join(c.tmp, 'ray-loop');
      const [local, r] = await Promise.all([
        runPolar(args(localRun), { cwd: ROOT, env, extendEnv: false, timeoutMs: 500_000 }),
        polarOnHead(
          c.net,
          c.ray,
          [
            ...args(clusterRun),
            '--cluster',
            `ray=${c.ray.address}`,
            '--cluster-memory',
            '256MiB',
            '--train-nodes',
            '2',
          ],
          { limitMs: 500_000, env },
        ),
      ]);
      assert.equal(local.exitCode, 0, String(local.stderr));
      assert.equal(r.code, 0, r.stderr);

      // the samples ran on both workers, one Ray task each
      const evalDir = join(clusterRun, 'step-1', 'eval');
      const results = readResultLines(evalDir);
      assert.equal(results.length, 4, 'two tasks x two samples');
      const nodes = new Set(results.map((l) => (l.cluster as { node: string }).node));
      assert.equal(nodes.size, 2, `samples ran on ${[...nodes].join(', ')}`);
      for (const node of nodes)
        assert.ok(
          c.ray.workers.some((w) => w.ip === node),
          `${node} is a worker`,
        );

      // the step's records are the local loop's
      const step = (run: string) =>
        JSON.parse(readFileSync(join(run, 'step-1', 'step.json'), 'utf8')) as Record<string, unknown>;
      const [ls, cs] = [step(localRun), step(clusterRun)];
      assert.deepEqual(Object.keys(cs).sort(), Object.keys(ls).sort());
      for (const k of ['status', 'policy', 'tasks', 'trajectories'] as const)
        assert.deepEqual(cs[k], ls[k], k);
      assert.deepEqual(
        (cs.rollouts as { samples: number }).samples,
        (ls.rollouts as { samples: number }).samples,
      );
      assert.ok(Number(cs.trainable_tokens) > 0);
      assert.ok(String(cs.checkpoint).startsWith(join(clusterRun, 'step-1', 'train')), String(cs.checkpoint));
      const [lv, cv] = [runView(join(localRun, 'step-1', 'eval')), runView(evalDir)];
      assert.deepEqual(cv.files, lv.files);
      const keys = (v: typeof lv) => v.results.map((x) => `${x.instance_id}/${x.sample}`);
      assert.deepEqual(keys(cv), keys(lv));
      // the session meta names the policy and the step, as the local loop records it
      for (const run of [localRun, clusterRun])
        for (const s of sessions(join(run, 'step-1', 'eval'))) {
          const meta = s.meta as Record<string, string>;
          assert.equal(meta.policy, 'step-0');
          assert.equal(meta.loop_step, '1');
        }
      assert.equal(
        lines(join(clusterRun, 'step-1', 'traj.jsonl')).length,
        lines(join(localRun, 'step-1', 'traj.jsonl')).length,
      );
      assert.ok(lines(join(clusterRun, 'step-1', 'train', 'metrics.jsonl')).length >= 1);
      // the training ran as two node ranks, one on each worker (ray_torchrun's placement, as the loop says it)
      for (const log of ['worker.log', 'worker-node1.log'])
        assert.ok(existsSync(join(clusterRun, 'step-1', 'train', log)), `train/${log}`);
      const placed = /trained on the Ray nodes (.*)/.exec(r.stderr);
      assert.ok(placed, r.stderr);
      assert.deepEqual(
        [...placed[1]!.matchAll(/(\d+\.\d+\.\d+\.\d+) \(node \d\)/g)].map((m) => m[1]).sort(),
        c.ray.workers.map((w) => w.ip).sort(),
      );
      assert.ok(existsSync(join(String(cs.checkpoint), 'model.safetensors')));
      // the loop's record of its flags names the cluster, not the words it passes on
      const recorded = JSON.parse(readFileSync(join(clusterRun, 'loop.json'), 'utf8'));
      assert.deepEqual(recorded.cluster, { engine: 'ray', address: c.ray.address });
    } finally {
      await standin.close();
      rmSync(dirname(home), { recursive: true, force: true });
    }
  });
});
