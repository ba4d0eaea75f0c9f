/**
 * Runs the Python worker's unittest suite (src/train/worker/tests) with the Python the launcher would use
 * and turns each Python test into a node subtest. Skips, saying why, when no Python with torch is found.
 * The suite is split over two test files (python-worker.test.ts: every module but the training runs;
 * python-worker-train.test.ts: TRAIN_MODULES), since node's per-file limit (scripts/test.mjs, 600 s) held
 * the whole suite with little room on a loaded 2-core machine; every module runs in exactly one of them.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import { WORKER_DIR } from '../../../src/train/launch.ts';
import { NO_TORCH, pythonWithTorch } from './fixtures.ts';

const probe = await pythonWithTorch();

interface PyResult {
  name: string;
  status: 'ok' | 'FAIL' | 'ERROR' | 'skipped';
  detail: string;
}

/** Parses `python -m unittest -v` output: `test_x (module.Class.test_x) ... ok` and the failure blocks. */
export function parseUnittest(output: string): PyResult[] {
  const results: PyResult[] = [];
  const re = /^(test\w*) \(([\w.]+)\)(?:\n[^\n]*?)? \.\.\. (ok|FAIL|ERROR|skipped.*)$/gm;
  for (const m of output.matchAll(re)) {
    const cls = m[2]!.endsWith(`.${m[1]}`) ? m[2]!.slice(0, -(m[1]!.length + 1)) : m[2]!;
    const status = m[3]!.startsWith('skipped') ? 'skipped' : (m[3] as PyResult['status']);
    results.push({ name: `${cls}.${m[1]}`, status, detail: '' });
  }
  for (const block of output.split(/^={50,}$/m).slice(1)) {
    const head = /^(FAIL|ERROR): (test\w*) \(([\w.]+)\)/m.exec(block);
    if (!head) continue;
    const cls = head[3]!.endsWith(`.${head[2]}`) ? head[3]!.slice(0, -(head[2]!.length + 1)) : head[3]!;
    const r = results.find((x) => x.name === `${cls}.${head[2]}`);
    if (r) r.detail = block.split(/^-{50,}$/m)[1]?.trim() ?? block.trim();
  }
  return results;
}

const TESTS = join(WORKER_DIR, 'tests');

/** The modules that run real training steps and processes: python-worker-train.test.ts runs them. */
export const TRAIN_MODULES = ['test_train', 'test_checkpoint_processes', 'test_metrics_resume'];

/** The worker's test modules (test_*.py), by name. */
export function workerModules(): string[] {
  return readdirSync(TESTS)
    .filter((f) => /^test_\w+\.py$/.test(f))
    .map((f) => f.slice(0, -3))
    .sort();
}

/** The unittest run of `modules` (names in src/train/worker/tests), one node subtest per Python test. */
export function pythonWorkerSuite(title: string, modules: string[]): void {
  describe(title, { skip: probe ? false : NO_TORCH }, async () => {
    if (!probe) return;
    assert.ok(modules.length > 0, 'no worker test modules to run');
    const run = await execa(probe.python, ['-m', 'unittest', '-v', ...modules], {
      cwd: TESTS,
      reject: false,
      // transformers' warnings (e.g. Qwen3.5's kernel fallbacks) would split unittest's result lines
      env: { PYTHONDONTWRITEBYTECODE: '1', TRANSFORMERS_VERBOSITY: 'error' },
      timeout: 540_000,
    });
    const results = parseUnittest(run.stderr);

    test('the suite ran and every test was seen', () => {
      const ran = /^Ran (\d+) tests?/m.exec(run.stderr);
      assert.ok(ran, `unittest did not report a count:\n${run.stderr.slice(-2000)}`);
      assert.equal(results.length, Number(ran[1]), 'every Python test maps to a subtest');
      assert.ok(results.length >= modules.length, 'each module ran its tests');
    });

    for (const r of results) {
      test(r.name, { skip: r.status === 'skipped' }, () => {
        assert.equal(r.status, 'ok', r.detail);
      });
    }
  });
}
