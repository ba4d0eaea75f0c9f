/**
 * `polar loop` for 2 steps on CPU, offline: a tiny Llama with the real Qwen3 vocabulary, fixture tasks,
 * real Pi through the embedded backend, the transformers trainer (.venv), ONNX export and in-process reload.
 * Asserts every artifact of both steps exists and validates, that step 2 sampled from the step-1 weights,
 * and that --resume after a kill mid-step finishes the run (with --json: the run's summary, one line on stdout).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ensureFixtureRepos } from '../../scripts/swe-fixtures.ts';
import { readCapture } from '../../src/capture/reader.ts';
import type { CallRecord, CaptureRecord, SessionRecord } from '../../src/capture/record.ts';
import { findPython } from '../../src/train/env.ts';
import { readTrajectories } from '../../src/trajectory/reader.ts';
import { privateDirs } from '../support/capture-run.ts';
import { ROOT, runPolar, startPolar } from '../support/cli.ts';
import { coinLoopArgs, EMBEDDED_TINY, loopEnv } from '../support/coin-loop.ts';
import { rescore } from '../support/tiny-model.ts';

// the trainer's Python: .venv of `npm run setup:python` (or $POLAR_PYTHON), with torch and transformers
const python = await findPython(process.env.POLAR_PYTHON).catch(() => null);
const SKIP = python?.transformers ? false : 'no Python with torch and transformers (npm run setup:python)';

async function captures(dir: string): Promise<CaptureRecord[][]> {
  const out: CaptureRecord[][] = [];
  for (const f of (await readdir(dir)).filter((x) => x.endsWith('.jsonl')).sort()) {
    const records: CaptureRecord[] = [];
    for await (const { record } of readCapture(join(dir, f))) records.push(record);
    out.push(records);
  }
  return out;
}

describe('polar loop on CPU', { skip: SKIP }, () => {
  test('2 steps: artifacts, on-policy sampling from the new weights, resume after a kill', async () => {
    ensureFixtureRepos();
    const { home, workdir } = await privateDirs();
    const run = join(workdir, 'run');
    // --overlong keep (EMBEDDED_TINY): this test is about the loop's artifacts, not overlong traces
    const args = coinLoopArgs(
      EMBEDDED_TINY,
      { steps: 2, tasksPerStep: 2, lr: '0.05', concurrency: 2, out: run },
      ['--eval-set', join(ROOT, 'fixtures/loop/coin.jsonl'), '--eval-every', '2', '--grade-empty-patches'],
    );
    const env = loopEnv(home, python!.executable);

    // first attempt: killed while step 2 runs (after step 1 finished)
    const first = startPolar(args, { cwd: workdir, env, extendEnv: false });
    const t0 = Date.now();
    while (!existsSync(join(run, 'step-2', 'eval')) && Date.now() - t0 < 300_000) {
      if (first.exitCode !== null && first.exitCode !== undefined) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    first.kill('SIGKILL');
    const killed = await first;
    assert.ok(
      existsSync(join(run, 'step-1', 'step.json')),
      `step 1 finished before the kill\n${killed.stderr}`,
    );
    assert.ok(!existsSync(join(run, 'step-2', 'step.json')), 'step 2 was cut short');

    // resume finishes the run; --json: its summary, one line on stdout at the end
    const resumed = await runPolar([...args, '--resume', '--json'], {
      cwd: workdir,
      env,
      extendEnv: false,
      timeoutMs: 400_000,
    });
    assert.equal(resumed.exitCode, 0, String(resumed.stderr));
    assert.match(String(resumed.stderr), /resuming after step 1/);
    const summary = JSON.parse(String(resumed.stdout).trim().split('\n').at(-1) ?? '');
    assert.equal(summary.out, run);
    assert.equal(summary.steps_done, 2);
    assert.deepEqual(
      summary.steps.map((s: { step: number }) => s.step),
      [1, 2],
    );
    const step2 = JSON.parse(await readFile(join(run, 'step-2', 'step.json'), 'utf8'));
    for (const key of ['step', 'status', 'policy', 'checkpoint', 'tasks', 'rollouts'])
      assert.deepEqual(summary.steps[1][key], step2[key], `the summary's step 2 ${key} is step.json's`);
    assert.equal(summary.checkpoint, summary.steps[1].checkpoint);

    for (const n of [1, 2]) {
      const dir = join(run, `step-${n}`);
      const step = JSON.parse(await readFile(join(dir, 'step.json'), 'utf8'));
      assert.equal(step.status, 'done');
      assert.equal(step.policy, `step-${n - 1}`);
      const report = JSON.parse(await readFile(join(dir, 'eval', 'report.json'), 'utf8'));
      assert.equal(report.total, 4, 'two tasks x two samples');
      const all = await captures(join(dir, 'eval', 'captures'));
      assert.equal(all.length, 4);
      for (const records of all) {
        const types = records.map((r) => r.type);
        assert.equal(types[0], 'session');
        assert.ok(types.includes('call'));
        assert.equal(types.at(-1), 'grading');
        assert.equal((records[0] as SessionRecord).meta.policy, `step-${n - 1}`);
        for (const c of records.filter((r): r is CallRecord => r.type === 'call' && r.error === null))
          assert.equal(c.token_exact, true);
      }
      let trajectories = 0;
      for await (const _ of readTrajectories(join(dir, 'traj.jsonl'))) trajectories++;
      assert.equal(trajectories, 4);
      const stats = JSON.parse(await readFile(join(dir, 'build-stats.json'), 'utf8'));
      assert.equal(stats.trajectories_written, 4);
      const metrics = (await readFile(join(dir, 'train', 'metrics.jsonl'), 'utf8')).trim().split('\n');
      assert.ok(metrics.length >= 1);
      assert.ok(existsSync(step.checkpoint), 'the checkpoint exists');
      assert.ok(existsSync(join(dir, 'onnx', 'config.json')));
      assert.ok(existsSync(join(dir, 'onnx', 'onnx', 'model.onnx')));
    }
    assert.ok(existsSync(join(run, 'step-2', 'heldout', 'report.json')), 'held-out eval on step 2');
    assert.ok(!existsSync(join(run, 'step-1', 'heldout')), 'no held-out eval on step 1');

    // step 2 sampled from the step-1 weights: its recorded logprobs are the step-1 model's, not step 0's
    const [records] = await captures(join(run, 'step-2', 'eval', 'captures'));
    const call = records!.find((r): r is CallRecord => r.type === 'call' && r.error === null)!;
    const ids = call.completion_token_ids!.slice(0, 4);
    const temperature = Number((call.canonical_request as { temperature?: number }).temperature ?? 1) || 1;
    const byStep1 = await rescore(join(run, 'step-1', 'onnx'), call.prompt_token_ids!, ids, temperature);
    const byStep0 = await rescore(join(run, 'step-0', 'onnx'), call.prompt_token_ids!, ids, temperature);
    const recorded = call.completion_logprobs!.slice(0, 4);
    const diff = (a: number[]) => Math.max(...a.map((x, i) => Math.abs(x - recorded[i]!)));
    assert.ok(diff(byStep1) < 1e-3, `step-1 weights explain the samples (max diff ${diff(byStep1)})`);
    assert.ok(diff(byStep0) > diff(byStep1) * 10, `step-0 weights do not (max diff ${diff(byStep0)})`);
  });
});
