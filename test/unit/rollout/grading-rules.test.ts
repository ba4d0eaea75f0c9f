/**
 * The resolution rules of the official harness on status maps (SWE-bench/SWE-bench grading.py at
 * v4.1.0 and v5.0.1), its log evaluation (markers, whole-log fallback, 5.x suite-ran and exit-code
 * checks), the 5.x exit-code capture, and the specs that decide what runs.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { SweInstance } from '../../../src/rollout/dataset.ts';
import { type GradeLogInstance, gradeLog, withExitCodeCapture } from '../../../src/rollout/grade.ts';
import { getLogParser, resolveParserName } from '../../../src/rollout/log-parsers/index.ts';
import { parsePytest } from '../../../src/rollout/log-parsers/pytest.ts';
import { evaluateLog, officialRules, type ResolutionRules, resolve } from '../../../src/rollout/resolve.ts';
import { diffFiles, REPO_SPECS, specFor, testDirectives } from '../../../src/rollout/specs.ts';
import { ROOT } from '../../support/cli.ts';

const V41: ResolutionRules = { version: '4.1', evalType: 'pass_and_fail' };
const V5: ResolutionRules = { version: '5', evalType: 'pass_and_fail' };
const map = (o: Record<string, string>) => new Map(Object.entries(o));
const lists = (f2p: string[], p2p: string[] = []) => ({ FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p });

test('a test missing from the log fails; PASSED and XFAIL pass (both versions)', () => {
  for (const rules of [V41, V5]) {
    const r = resolve(lists(['a', 'x'], ['b']), map({ a: 'PASSED', x: 'XFAIL', b: 'PASSED' }), rules);
    assert.equal(r.resolved, true);
    const missing = resolve(lists(['a', 'gone']), map({ a: 'PASSED' }), rules);
    assert.equal(missing.resolved, false);
    assert.deepEqual(missing.fail_to_pass.failed, ['gone']);
    const p2pFail = resolve(lists(['a'], ['b']), map({ a: 'PASSED', b: 'ERROR' }), rules);
    assert.deepEqual(p2pFail.pass_to_pass.failed, ['b']);
    assert.equal(p2pFail.resolved, false);
    assert.equal(resolve(lists([], []), map({}), rules).resolved, true);
  }
});

test('a skipped FAIL_TO_PASS: counted nowhere in 4.1, a failure in 5.x and under polar', () => {
  const tests = map({ a: 'SKIPPED', b: 'PASSED' });
  const v4 = resolve(lists(['a'], ['b']), tests, V41);
  assert.equal(v4.resolved, true);
  assert.deepEqual(v4.fail_to_pass, { passed: [], failed: [], uncounted: ['a'] });
  assert.equal(resolve(lists(['a'], ['b']), tests, V5).resolved, false);
  assert.equal(resolve(lists(['a'], ['b']), tests, { ...V41, skippedFailToPassFails: true }).resolved, false);
});

test('a skipped PASS_TO_PASS: counted nowhere in 4.1, maintained in 5.x', () => {
  const tests = map({ a: 'PASSED', b: 'SKIPPED' });
  const v4 = resolve(lists(['a'], ['b']), tests, V41);
  assert.deepEqual(v4.pass_to_pass.uncounted, ['b']);
  assert.equal(v4.resolved, true);
  const v5 = resolve(lists(['a'], ['b']), tests, V5);
  assert.deepEqual(v5.pass_to_pass.passed, ['b']);
});

test('a status word outside the five (e.g. `ERROR:` as the first word) is neither passed nor failed', () => {
  const r = resolve(lists(['a']), map({ a: 'ERROR:' }), V41);
  assert.deepEqual(r.fail_to_pass.uncounted, ['a']);
});

test('5.x prefix matching of truncated ids, only when all candidates agree', () => {
  const tests = map({
    't.py::f[log(photon cm-2 s-1)]': 'PASSED',
    't.py::g[a b]': 'PASSED',
    't.py::g[a c]': 'FAILED',
  });
  assert.equal(resolve(lists(['t.py::f[log(photon']), tests, V5).resolved, true);
  assert.equal(resolve(lists(['t.py::f[log(photon']), tests, V41).resolved, false);
  // candidates disagree: not resolved
  assert.deepEqual(resolve(lists(['t.py::g[a']), tests, V5).fail_to_pass.failed, ['t.py::g[a']);
  // a balanced id never prefix-matches
  assert.equal(resolve(lists(['t.py::f']), tests, V5).resolved, false);
});

test('eval_type fail_only: only a FAILED entry fails; missing and ERROR pass', () => {
  const rules: ResolutionRules = { version: '5', evalType: 'fail_only' };
  const r = resolve(lists(['a', 'b', 'c'], ['d']), map({ b: 'ERROR', c: 'FAILED' }), rules);
  assert.deepEqual(r.fail_to_pass.passed, ['a', 'b']);
  assert.deepEqual(r.fail_to_pass.failed, ['c']);
  assert.deepEqual(r.pass_to_pass.passed, ['d']);
  assert.equal(
    officialRules({ repo: 'x/y', eval_script: 's', eval_type: 'fail_only' }).evalType,
    'fail_only',
  );
  assert.equal(officialRules({ repo: 'markedjs/marked' }).evalType, 'fail_only');
  assert.equal(officialRules({ repo: 'django/django' }).version, '4.1');
  assert.equal(officialRules({ repo: 'django/django', eval_script: 's' }).version, '5');
});

const wrap = (body: string, code?: number) =>
  `+ git apply\n>>>>> Start Test Output\n${body}\n>>>>> End Test Output\n${code === undefined ? '' : `>>>>> Test Exit Code: ${code}\n`}`;

test('log evaluation: harness failure codes, missing markers, output outside the markers', () => {
  const pytest = getLogParser('pytest')!;
  for (const v of ['4.1', '5'] as const) {
    assert.equal(evaluateLog(`${wrap('PASSED a.py::t')}>>>>> Tests Timed Out\n`, pytest, v).found, false);
    assert.equal(evaluateLog('>>>>> Start Test Output\nPASSED a.py::t\n', pytest, v).found, false);
    const outside = evaluateLog(`PASSED a.py::t\n${wrap('nothing parsed here', 0)}`, pytest, v);
    assert.equal(outside.found, true);
    assert.equal(outside.tests.get('a.py::t'), 'PASSED');
  }
});

test('5.x log evaluation: a suite that never ran, and PASSED lines the exit code contradicts', () => {
  const pytest = getLogParser('pytest')!;
  assert.equal(evaluateLog(wrap('command not found', 127), pytest, '5').found, false);
  assert.equal(evaluateLog(wrap('command not found', 127), pytest, '4.1').found, true);
  assert.equal(evaluateLog(wrap('  3 passing (12ms)', 0), pytest, '5').found, true);
  const fake = wrap('PASSED a.py::t', 1);
  const v5 = evaluateLog(fake, pytest, '5');
  assert.equal(v5.found, false);
  assert.match(v5.reason!, /suspicious/);
  assert.equal(evaluateLog(fake, pytest, '4.1').found, true);
  assert.equal(evaluateLog(wrap('PASSED a.py::t\nFAILED a.py::u', 1), pytest, '5').found, true);
});

const row = (over: Partial<SweInstance> = {}): GradeLogInstance => ({
  repo: 'pytest-dev/pytest',
  version: '8.0',
  FAIL_TO_PASS: [],
  PASS_TO_PASS: [],
  ...over,
});

test('gradeLog: polar adds the two 5.x guards to 4.1 rows; official follows v4.1.0 exactly', () => {
  const fake = wrap('PASSED a.py::t\nSKIPPED a.py::s', 2);
  const inst = row({ FAIL_TO_PASS: ['a.py::t'] });
  const polar = gradeLog(inst, fake);
  assert.ok(!('error' in polar));
  assert.equal(polar.resolved, false);
  assert.equal(polar.suspicious, true);
  const official = gradeLog(inst, fake, { semantics: 'official' });
  assert.ok(!('error' in official));
  assert.equal(official.resolved, true);
  const skipped = row({ FAIL_TO_PASS: ['a.py::s'] });
  const okLog = wrap('PASSED a.py::t\nSKIPPED a.py::s', 0);
  assert.equal((gradeLog(skipped, okLog) as { resolved: boolean }).resolved, false);
  assert.equal((gradeLog(skipped, okLog, { semantics: 'official' }) as { resolved: boolean }).resolved, true);
});

const fixture = (name: string) => readFileSync(join(ROOT, 'fixtures/swe-logs/logs', name), 'utf8');

test('gradeLog on real runner logs: Django docstring ids, seaborn tear-down errors', () => {
  const django = row({
    repo: 'django/django',
    version: '4.0',
    FAIL_TO_PASS: ['Named URLs should be reversible.', '--version is equivalent to version'],
    PASS_TO_PASS: [
      'test_plain (gradeapp.tests.ReverseTests.test_plain)',
      'test_prints_then_passes (gradeapp.tests.OutputTests.test_prints_then_passes)',
    ],
  });
  const g = gradeLog(django, fixture('django-runner.log'), { semantics: 'official' });
  assert.ok(!('error' in g));
  assert.equal(g.resolved, true, g.reason ?? '');
  const broken = { ...django, PASS_TO_PASS: ['test_fails (gradeapp.tests.OutcomeTests.test_fails)'] };
  assert.equal((gradeLog(broken, fixture('django-runner.log')) as { resolved: boolean }).resolved, false);

  const teardown = ['test_outcomes.py::test_teardown_error'];
  const seaborn = row({ repo: 'mwaskom/seaborn', version: '0.12', FAIL_TO_PASS: teardown });
  assert.equal((gradeLog(seaborn, fixture('pytest8-seaborn.log')) as { resolved: boolean }).resolved, true);
  const plain = row({ FAIL_TO_PASS: teardown });
  assert.equal((gradeLog(plain, fixture('pytest8-seaborn.log')) as { resolved: boolean }).resolved, false);
});

test('5.x eval_script: the exit code is captured before the end marker and echoed after it', () => {
  const script = withExitCodeCapture(
    "#!/bin/bash\nset -uxo pipefail\ncd /testbed\n: '>>>>> Start Test Output'\npytest -rA\n: '>>>>> End Test Output'\ngit checkout x\n",
  );
  assert.equal(
    script,
    "#!/bin/bash\nset -uxo pipefail\ncd /testbed\n: '>>>>> Start Test Output'\npytest -rA\nSWEBENCH_TEST_EXIT_CODE=$?\n: '>>>>> End Test Output'\necho \">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE\"\ngit checkout x\n",
  );
  assert.equal(withExitCodeCapture('echo hi'), '#!/bin/bash\nset -uxo pipefail\necho hi\n');
});

test('specs: astropy versions, sklearn and sphinx on pytest_v2, 5.x parser names', () => {
  const astropy = REPO_SPECS['astropy/astropy']!;
  for (const v of ['3.0', '3.1', '3.2', '4.1', '4.2', '4.3', '5.0', '5.1', '5.2', 'v5.3'])
    assert.equal(astropy.spec(v).cmd, 'pytest -rA', v);
  for (const v of ['0.1', '1.3'])
    assert.equal(astropy.spec(v).cmd, 'pytest -rA -vv -o console_output_style=classic --tb=no');
  assert.equal(REPO_SPECS['scikit-learn/scikit-learn']!.parser, 'pytest-v2');
  assert.equal(REPO_SPECS['sphinx-doc/sphinx']!.parser, 'pytest-v2');
  assert.equal(REPO_SPECS['django/django']!.spec('1.9').cmd, './tests/runtests.py --verbosity 2');
  for (const name of ['parse_log_scikit', 'parse_log_astroid', 'parse_log_sphinx', 'parse_log_pydicom'])
    assert.notEqual(resolveParserName(name), null, name);
  const spec = specFor({ ...(row() as SweInstance), log_parser: 'parse_log_nope' });
  assert.match((spec as { error: string }).error, /unknown log_parser/);
});

test('test directives: the official NON_TEST_EXTS by suffix, paths with spaces whole', () => {
  const patch = [
    'a/x.json',
    'tests/data.csv',
    'tests/datacsv',
    'setup.cfg',
    'docs/x.rst',
    'tox.ini',
    'a/b.toml',
    'img.jpeg',
    'm.pkl',
    'tests/test dir/test_a b.py',
    'tests/test_x.py',
  ]
    .map((f) => `diff --git a/${f} b/${f}\n--- a/${f}\n+++ b/${f}\n`)
    .join('');
  assert.deepEqual(testDirectives(patch, 'paths'), [
    'setup.cfg',
    'docs/x.rst',
    'tox.ini',
    'tests/test dir/test_a b.py',
    'tests/test_x.py',
  ]);
  assert.deepEqual(diffFiles('diff --git a/old name.py b/new name.py\n'), ['new name.py']);
  assert.deepEqual(
    testDirectives(
      'diff --git a/tests/admin_views/tests.py b/tests/admin_views/tests.py\n',
      'django-modules',
    ),
    ['admin_views.tests'],
  );
});

test('pytest: 5.x drops the SKIPPED [N] summary count, 4.1 keeps it as an id', () => {
  const log = 'SKIPPED [2] t.py:3: no\nPASSED t.py::a\n';
  assert.equal(parsePytest(log, '4.1').get('[2]'), 'SKIPPED');
  assert.equal(parsePytest(log, '5').has('[2]'), false);
});
