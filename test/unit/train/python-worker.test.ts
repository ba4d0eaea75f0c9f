/** The Python worker's unittest modules but the training runs (python-worker-suite.ts), and the parser of unittest's output. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseUnittest, pythonWorkerSuite, TRAIN_MODULES, workerModules } from './python-worker-suite.ts';

const modules = workerModules();
test('the worker test modules are split over the two files, none left out', () => {
  assert.ok(modules.length >= 8, `worker test modules: ${modules}`);
  for (const m of TRAIN_MODULES)
    assert.ok(modules.includes(m), `${m} (TRAIN_MODULES) is a worker test module`);
});

pythonWorkerSuite(
  'python worker (unittest): data, loss, reports, launchers',
  modules.filter((m) => !TRAIN_MODULES.includes(m)),
);

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
