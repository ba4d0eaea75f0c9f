/**
 * `polar loop --report-to tensorboard` end to end on CPU: the tiny loop of loop.test.ts (a tiny Llama with
 * the real Qwen3 vocabulary, fixture tasks, real Pi through the embedded backend, the transformers
 * trainer) runs 2 steps, then `--resume --steps 3` runs a 3rd into the same run. The TensorBoard folder is
 * read back with TensorBoard's own EventAccumulator (test/support/trackers.ts): every rollout figure (pass
 * rate, reward mean and std, samples per status) and every health figure at each loop step 1..3 with the
 * values of the step's step.json and eval/results.jsonl, every trainer figure at each optimiser step with
 * the values of that step's train/metrics.jsonl; each step once, none missing, one event file per process
 * in the same folder. Only the run's one writer (python -m polar_train.report) imports tensorboard: not
 * the training workers, not the ONNX export.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { ensureFixtureRepos } from '../../scripts/swe-fixtures.ts';
import { findPython } from '../../src/train/env.ts';
import { privateDirs } from '../support/capture-run.ts';
import { runPolar } from '../support/cli.ts';
import { coinLoopArgs, EMBEDDED_TINY, loopEnv } from '../support/coin-loop.ts';
import { canImport, tensorboardScalars, watchTrackerImports } from '../support/trackers.ts';

const python = await findPython(process.env.POLAR_PYTHON).catch(() => null);
const SKIP = !python?.transformers
  ? 'no Python with torch and transformers (npm run setup:python)'
  : !(await canImport(python.executable, 'tensorboard'))
    ? 'tensorboard is not installed (npm run setup installs the tracking group)'
    : false;

/** the trainer's figures of every step, checked value by value (float32 in the event files) */
const TRAIN = ['loss', 'pg_loss', 'kl', 'clip_frac', 'clip_frac_low', 'clip_frac_high', 'ratio_mean'];
const TRAIN_ALSO = ['entropy', 'grad_norm', 'lr', 'tokens_per_s', 'updates', 'rollouts', 'tokens'];

/** step.json's health fields and the tags they are logged under */
const HEALTH: Record<string, string> = {
  no_signal_share: 'health/no_signal_share',
  groups_no_signal: 'health/groups_no_signal',
  drift_rate: 'health/token_drift_rate',
  truncated_traces: 'health/truncated_traces',
  failed_call_rate: 'health/failed_call_rate',
  infra_errors: 'health/infra_errors',
  tool_calls_unparsed: 'health/tool_calls_unparsed',
};

function close(actual: number | undefined, expected: number, what: string): void {
  assert.ok(actual !== undefined, `${what} was logged`);
  const f32 = Math.fround(expected);
  assert.ok(Math.abs(actual - f32) <= 1e-6 * Math.max(1, Math.abs(f32)), `${what}: ${actual} != ${expected}`);
}

async function jsonl(path: string): Promise<Array<Record<string, unknown>>> {
  return (await readFile(path, 'utf8'))
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

describe('polar loop --report-to tensorboard on CPU', { skip: SKIP }, () => {
  test('3 steps (2, then --resume for a 3rd): every figure at every step, as the run files hold it', async () => {
    ensureFixtureRepos();
    const { home, workdir } = await privateDirs();
    const base = dirname(home);
    try {
      const run = join(workdir, 'run');
      const watch = await watchTrackerImports(base);
      // one task a step (fixtures/loop/coin.jsonl holds two): the shortest loop that still trains
      const args = (steps: number) =>
        coinLoopArgs(EMBEDDED_TINY, { steps, tasksPerStep: 1, lr: '0.05', concurrency: 2, out: run }, [
          '--grade-empty-patches',
          '--report-to',
          'tensorboard',
        ]);
      const env = loopEnv(home, python!.executable, watch.env);
      const opts = { cwd: workdir, env, extendEnv: false };
      // both runs within the test file's 600 s (scripts/test.mjs): each is killed at its limit, none outlives the test
      const first = await runPolar(args(2), { ...opts, timeoutMs: 330_000 });
      assert.equal(first.exitCode, 0, first.stderr);
      const resumed = await runPolar([...args(3), '--resume'], { ...opts, timeoutMs: 240_000 });
      assert.equal(resumed.exitCode, 0, resumed.stderr);
      assert.match(resumed.stderr, /resuming after step 2/);

      const tbDir = join(run, 'tensorboard');
      const tracking = JSON.parse(await readFile(join(run, 'tracking.json'), 'utf8'));
      assert.deepEqual(tracking, { v: 1, tensorboard: { dir: tbDir }, wandb: null });
      const files = (await readdir(tbDir)).filter((f) => f.startsWith('events.out.tfevents.'));
      assert.equal(files.length, 2, `one event file per process, in the same folder: ${files}`);

      const scalars = await tensorboardScalars(python!.executable, tbDir);
      const at = (tag: string, step: number): number | undefined => {
        const points = (scalars[tag] ?? []).filter(([s]) => s === step);
        assert.ok(points.length <= 1, `${tag} was written ${points.length} times at step ${step}`);
        return points[0]?.[1];
      };
      // each tag's steps: each at most once, in order, none past the run's 3 steps
      for (const [tag, points] of Object.entries(scalars)) {
        const steps = points.map(([s]) => s);
        assert.deepEqual(
          steps,
          [...new Set(steps)].sort((a, b) => a - b),
          `${tag}: ${steps}`,
        );
        assert.ok(
          steps.every((s) => s >= 1 && s <= 3),
          `${tag}: steps ${steps}`,
        );
      }

      for (const n of [1, 2, 3]) {
        const dir = join(run, `step-${n}`);
        const step = JSON.parse(await readFile(join(dir, 'step.json'), 'utf8'));
        assert.equal(step.status, 'done');

        // the rollouts: pass rate from step.json, reward and status counts from the graded results
        close(at('rollout/pass_at_1', n), step.rollouts.pass_at_1, `rollout/pass_at_1 step ${n}`);
        close(at('rollout/samples', n), step.rollouts.samples, `rollout/samples step ${n}`);
        const results = await jsonl(join(dir, 'eval', 'results.jsonl'));
        assert.equal(results.length, 2, 'one task x two samples');
        const rewards = results.map((r) => r.reward).filter((r): r is number => typeof r === 'number');
        assert.ok(rewards.length > 0, `step ${n} has rewarded samples`);
        const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
        const std = Math.sqrt(rewards.reduce((a, b) => a + (b - mean) ** 2, 0) / rewards.length);
        close(at('rollout/reward_mean', n), mean, `rollout/reward_mean step ${n}`);
        close(at('rollout/reward_std', n), std, `rollout/reward_std step ${n}`);
        const statuses = new Map<string, number>();
        for (const r of results) statuses.set(String(r.status), (statuses.get(String(r.status)) ?? 0) + 1);
        for (const [status, count] of statuses)
          close(at(`rollout/status/${status}`, n), count, `rollout/status/${status} step ${n}`);
        const build = JSON.parse(await readFile(join(dir, 'build-stats.json'), 'utf8'));
        close(at('rollout/trajectories', n), build.trajectories_written, `rollout/trajectories step ${n}`);

        // the health: every figure step.json holds is logged with its value; one it leaves null is not
        for (const [field, tag] of Object.entries(HEALTH)) {
          const value = step.health[field];
          if (typeof value === 'number') close(at(tag, n), value, `${tag} step ${n}`);
          else assert.equal(at(tag, n), undefined, `${tag} step ${n}: step.json holds ${value}`);
        }

        // the trainer: one line per optimiser step in the step's own metrics.jsonl, the loop's step n
        const metrics = await jsonl(join(dir, 'train', 'metrics.jsonl'));
        assert.deepEqual(
          metrics.map((m) => m.step),
          [n],
          `step-${n}/train/metrics.jsonl holds trainer step ${n}`,
        );
        const line = metrics[0]!;
        for (const key of [...TRAIN, ...TRAIN_ALSO]) {
          const v = line[key];
          assert.equal(typeof v, 'number', `metrics.jsonl step ${n} has ${key}`);
          close(at(`train/${key}`, n), v as number, `train/${key} step ${n}`);
        }
      }
      // no gap: each figure every step logs is there at 1, 2 and 3
      for (const tag of ['rollout/pass_at_1', 'rollout/reward_mean', 'health/infra_errors', 'train/loss'])
        assert.deepEqual(
          scalars[tag]!.map(([s]) => s),
          [1, 2, 3],
          tag,
        );

      // tensorboard was imported by the run's writer only (one per polar process), never by a worker
      const imports = watch.imports();
      assert.ok(imports.length > 0, 'the watch saw the writer import tensorboard');
      for (const i of imports)
        assert.ok(
          i.argv.includes('polar_train.report'),
          `${i.module} imported by ${i.argv.join(' ')}, not by the tracking writer`,
        );
      assert.ok(!imports.some((i) => i.module.startsWith('wandb')), 'wandb was not imported');
      assert.ok(!existsSync(join(run, 'wandb')));
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });
});
