/**
 * Runs the Python worker's unittest suite (src/train/worker/tests) with the Python the launcher would use
 * and turns each Python test into a node subtest. Skips, saying why, when no Python with torch is found.
 */
import assert from 'node:assert/strict';
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

describe('python worker (unittest)', { skip: probe ? false : NO_TORCH }, async () => {
  if (!probe) return;
  const run = await execa(
    probe.python,
    ['-m', 'unittest', 'discover', '-s', join(WORKER_DIR, 'tests'), '-v'],
    {
      reject: false,
      // transformers' warnings (e.g. Qwen3.5's kernel fallbacks) would split unittest's result lines
      env: { PYTHONDONTWRITEBYTECODE: '1', TRANSFORMERS_VERBOSITY: 'error' },
      timeout: 540_000,
    },
  );
  const results = parseUnittest(run.stderr);

  test('the suite ran and every test was seen', () => {
    const ran = /^Ran (\d+) tests?/m.exec(run.stderr);
    assert.ok(ran, `unittest did not report a count:\n${run.stderr.slice(-2000)}`);
    assert.equal(results.length, Number(ran[1]), 'every Python test maps to a subtest');
    assert.ok(results.length >= 20);
  });

  for (const r of results) {
    test(r.name, { skip: r.status === 'skipped' }, () => {
      assert.equal(r.status, 'ok', r.detail);
    });
  }
});

test('parseUnittest reads ok, failures and their tracebacks', () => {
  const out = [
    'test_a (m.C.test_a) ... ok',
    'test_b (m.C) ... FAIL',
    'test_c (m.D.test_c)',
    'Docstring line ... ERROR',
    'test_d (m.D.test_d) ... skipped "no cuda"',
    '',
    '======================================================================',
    'FAIL: test_b (m.C)',
    '----------------------------------------------------------------------',
    'AssertionError: 1 != 2',
    '',
  ].join('\n');
  const r = parseUnittest(out);
  assert.deepEqual(
    r.map((x) => [x.name, x.status]),
    [
      ['m.C.test_a', 'ok'],
      ['m.C.test_b', 'FAIL'],
      ['m.D.test_c', 'ERROR'],
      ['m.D.test_d', 'skipped'],
    ],
  );
  assert.match(r[1]!.detail, /1 != 2/);
});
