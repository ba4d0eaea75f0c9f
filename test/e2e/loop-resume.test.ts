/**
 * `polar loop` stopped by Ctrl-C and continued with --resume keeps the paid work (issue 47 item 5), with
 * real interrupts: SIGINT while step 1 trains says to run it again with --resume (it said "run the same
 * command again", which the loop refuses on a run folder); --resume keeps step 1's graded rollouts (none
 * runs again) and redoes its unfinished training; SIGINT during step 2's held-out evaluation, then --resume
 * keeps step 2's finished training and its ONNX export (it redid the step from scratch). Every step's
 * metrics.jsonl holds each trainer step once. The coin tasks, real Pi, the tiny Llama served by polar
 * itself (test/support/coin-loop.ts), trained on the CPU.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { ResultPromise } from 'execa';
import { ensureFixtureRepos } from '../../scripts/swe-fixtures.ts';
import { findPython } from '../../src/train/env.ts';
import { privateDirs } from '../support/capture-run.ts';
import { ROOT, runPolar, startPolar } from '../support/cli.ts';
import { coinLoopArgs, EMBEDDED_TINY, loopEnv } from '../support/coin-loop.ts';

const python = await findPython(process.env.POLAR_PYTHON).catch(() => null);
const SKIP = python?.transformers ? false : 'no Python with torch and transformers (npm run setup:python)';

/** Polls `ready` until it holds, the process ended, or 300 s passed. */
async function until(child: ResultPromise, ready: () => boolean): Promise<void> {
  const t0 = Date.now();
  while (!ready() && Date.now() - t0 < 300_000) {
    if (child.exitCode !== null && child.exitCode !== undefined) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const lines = (file: string) => readFileSync(file, 'utf8').split('\n').filter(Boolean);

/** Six held-out rows (the coin tasks under other ids): a held-out evaluation long enough to stop in. */
function heldoutSet(dir: string): string {
  const rows = lines(join(ROOT, 'fixtures/loop/coin.jsonl')).map((l) => JSON.parse(l));
  const out = Array.from({ length: 6 }, (_, i) => ({
    ...rows[i % 2],
    instance_id: `${rows[i % 2].instance_id}-h${i}`,
  }));
  const path = join(dir, 'heldout.jsonl');
  writeFileSync(path, out.map((r) => `${JSON.stringify(r)}\n`).join(''));
  return path;
}

describe('polar loop: Ctrl-C, then --resume keeps the paid work', { skip: SKIP }, () => {
  test('SIGINT in step 1 training and in step 2 held-out; each --resume keeps what was done', async () => {
    ensureFixtureRepos();
    const { home, workdir } = await privateDirs();
    const run = join(workdir, 'run');
    const args = coinLoopArgs(
      EMBEDDED_TINY,
      { steps: 2, tasksPerStep: 2, lr: '0.05', concurrency: 2, out: run },
      ['--eval-set', heldoutSet(workdir), '--eval-every', '2', '--grade-empty-patches'],
    );
    const env = loopEnv(home, python!.executable);
    const step = (n: number, ...rest: string[]) => join(run, `step-${n}`, ...rest);

    // 1. Ctrl-C once step 1's training has started (its config is written just before the worker starts)
    const first = startPolar(args, { cwd: workdir, env, extendEnv: false });
    await until(first, () => existsSync(step(1, 'train', 'config.json')));
    first.kill('SIGINT');
    const a = await first;
    assert.equal(a.exitCode, 130, String(a.stderr));
    assert.match(String(a.stderr), /run the same command with --resume to continue/);
    assert.doesNotMatch(String(a.stderr), /run the same command again/);
    const graded = lines(step(1, 'eval', 'results.jsonl'));
    assert.equal(graded.length, 4, 'step 1: two tasks x two samples, graded before its training');
    const capture = join(step(1, 'eval', 'captures'), JSON.parse(graded[0]!).capture.split('/').pop());
    const captureTime = statSync(capture).mtimeMs;

    // 2. --resume: step 1's rollouts are kept (none runs again); Ctrl-C in step 2's held-out evaluation
    const second = startPolar([...args, '--resume'], { cwd: workdir, env, extendEnv: false });
    await until(second, () => existsSync(step(2, 'heldout', 'captures')));
    second.kill('SIGINT');
    const b = await second;
    assert.equal(b.exitCode, 130, `stopped in step 2's held-out evaluation\n${b.stderr}`);
    assert.match(String(b.stderr), /resume: 4 samples already graded, 0 to run/);
    assert.deepEqual(lines(step(1, 'eval', 'results.jsonl')), graded, "step 1's results as they were");
    assert.equal(statSync(capture).mtimeMs, captureTime, 'a graded capture is not written again');
    assert.ok(existsSync(step(1, 'step.json')), String(b.stderr));
    assert.ok(!existsSync(step(2, 'step.json')));
    const trained2 = readFileSync(step(2, 'train', 'latest'), 'utf8').trim();
    const exported2 = statSync(step(2, 'onnx', 'onnx', 'model.onnx')).mtimeMs;

    // 3. --resume: step 2's training and export are kept, its held-out evaluation continued
    const c = await runPolar([...args, '--resume'], {
      cwd: workdir,
      env,
      extendEnv: false,
      timeoutMs: 400_000,
    });
    assert.equal(c.exitCode, 0, String(c.stderr));
    assert.match(String(c.stderr), /resuming after step 1/);
    assert.match(String(c.stderr), /continuing the unfinished .*step-2: graded rollouts kept, training kept/);
    assert.match(String(c.stderr), /kept the export of .*step-2.* in .*step-2\/onnx/);
    assert.equal(readFileSync(step(2, 'train', 'latest'), 'utf8').trim(), trained2);
    assert.equal(statSync(step(2, 'onnx', 'onnx', 'model.onnx')).mtimeMs, exported2, 'not exported again');
    assert.equal(lines(step(2, 'heldout', 'results.jsonl')).length, 6);
    for (const n of [1, 2]) {
      assert.equal(JSON.parse(readFileSync(step(n, 'step.json'), 'utf8')).status, 'done');
      const steps = lines(step(n, 'train', 'metrics.jsonl')).map((l) => JSON.parse(l).step as number);
      assert.deepEqual(steps, [...new Set(steps)], `step-${n}/train/metrics.jsonl holds each step once`);
      assert.equal(steps.length, 1);
    }
  });
});
