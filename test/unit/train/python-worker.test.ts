/**
 * Runs the Python worker's unittest suite (src/train/worker/tests) with the Python the launcher would use
 * and turns each Python test into a node subtest. Skips, saying why, when no Python with torch is found.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import { trainAdvantages } from '../../../src/train/config.ts';
import { WORKER_DIR } from '../../../src/train/launch.ts';
import { groupAdvantages } from '../../../src/trajectory/advantage.ts';
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

  test('the worker computes the same advantages as polar build (src/trajectory/advantage.ts)', async () => {
    // groups of 1 to 5 rollouts with uneven rewards, plus two records without any group
    const groups = [[1], [0, 1], [0.25, 1, 0], [1, 1, 0, 0.5], [0, 0, 0, 1, 0.75]];
    const records: Record<string, unknown>[] = groups.flatMap((rewards, g) =>
      rewards.map((reward, i) => ({
        id: `g${g}-${i}`,
        group_id: `g${g}`,
        task_id: null,
        reward,
        advantage: null,
      })),
    );
    records.push(
      { id: 'lone-a', group_id: null, task_id: null, reward: 1, advantage: null },
      { id: 'lone-b', group_id: null, task_id: null, reward: 0, advantage: null },
    );
    const script =
      'import json, sys; from polar_train.data import compute_advantages as c; ' +
      'recs = json.load(sys.stdin); print(json.dumps({m: c(recs, m) for m in sys.argv[1:]}))';
    const py = await execa(probe.python, ['-c', script, ...trainAdvantages], {
      input: JSON.stringify(records),
      env: { PYTHONPATH: WORKER_DIR, PYTHONDONTWRITEBYTECODE: '1' },
    });
    const got = JSON.parse(py.stdout) as Record<string, number[]>;
    for (const mode of trainAdvantages) {
      // records without a group get no advantage in polar build (null) and 0 in the worker: no baseline
      const want = [...groups.flatMap((rewards) => groupAdvantages(rewards, mode)), 0, 0];
      assert.equal(got[mode]!.length, want.length);
      got[mode]!.forEach((v, i) => {
        assert.ok(Math.abs(v - want[i]!) < 1e-9, `${mode} record ${i}: worker ${v}, polar build ${want[i]}`);
      });
    }
  });
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
