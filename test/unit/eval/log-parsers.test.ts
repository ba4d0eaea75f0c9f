import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseDjango } from '../../../src/eval/log-parsers/django.ts';
import { getLogParser, resolveParserName } from '../../../src/eval/log-parsers/index.ts';
import { parseNodeTest } from '../../../src/eval/log-parsers/node-test.ts';
import {
  parseMatplotlib,
  parsePytest,
  parsePytestOptions,
  parsePytestV2,
  parseSeaborn,
} from '../../../src/eval/log-parsers/pytest.ts';
import { parseSympy } from '../../../src/eval/log-parsers/sympy.ts';

const PYTEST_RA = `============================= test session starts ==============================
platform linux -- Python 3.9.19, pytest-7.4.0, pluggy-1.0.0
rootdir: /testbed
collected 5 items

tests/test_stats.py ..F.sx                                               [100%]

=================================== FAILURES ===================================
_______________________________ test_median_even _______________________________

    def test_median_even():
>       assert median([1, 2, 3, 4]) == 2.5
E       assert 3 == 2.5

tests/test_stats.py:18: AssertionError
==================================== PASSES ====================================
=========================== short test summary info ============================
PASSED tests/test_stats.py::test_mean
PASSED tests/test_stats.py::test_mean_empty
PASSED tests/test_stats.py::test_param[1-2]
SKIPPED [1] tests/test_stats.py:30: needs numpy
XFAIL tests/test_stats.py::test_known - reason: upstream bug
FAILED tests/test_stats.py::test_median_even - assert 3 == 2.5
ERROR tests/test_io.py::test_open - FileNotFoundError: x
==================== 1 failed, 3 passed, 1 skipped, 1 xfailed in 0.12s =====================
`;

test('pytest -rA summary lines', () => {
  const m = parsePytest(PYTEST_RA);
  assert.equal(m.get('tests/test_stats.py::test_mean'), 'PASSED');
  assert.equal(m.get('tests/test_stats.py::test_param[1-2]'), 'PASSED');
  assert.equal(m.get('tests/test_stats.py::test_median_even'), 'FAILED');
  assert.equal(m.get('tests/test_stats.py::test_known'), 'XFAIL');
  assert.equal(m.get('tests/test_io.py::test_open'), 'ERROR');
  assert.equal(m.has('tests/test_stats.py::test_median_odd'), false);
  // the SKIPPED summary line has a count and a location, not an id; swebench records it as "[1]" too
  assert.equal(m.get('[1]'), 'SKIPPED');
  assert.equal(m.size, 7);
});

test('pytest with options keeps parametrised ids that contain spaces', () => {
  const log =
    'PASSED tests/test_requests.py::test_x[a b c]\nFAILED tests/test_requests.py::test_y[http://a b] - AssertionError\nPASSED tests/t.py::plain\n';
  const m = parsePytestOptions(log);
  assert.equal(m.get('tests/test_requests.py::test_x[a b c]'), 'PASSED');
  assert.equal(m.get('tests/test_requests.py::test_y[http://a b]'), 'FAILED');
  assert.equal(m.get('tests/t.py::plain'), 'PASSED');
  // the plain parser splits at the space, like swebench's parse_log_pytest
  assert.equal(parsePytest(log).get('tests/test_requests.py::test_x[a'), 'PASSED');
});

test('pytest v2 (astropy): colour codes and verbose lines', () => {
  const log =
    '\x1b[32mPASSED\x1b[0m astropy/io/tests/test_a.py::test_one\n' +
    'astropy/io/tests/test_a.py::test_two FAILED                     [ 50%]\n' +
    'astropy/io/tests/test_a.py::test_three PASSED [100%]\n';
  const m = parsePytestV2(log);
  assert.equal(m.get('astropy/io/tests/test_a.py::test_one'), 'PASSED');
  assert.equal(m.get('astropy/io/tests/test_a.py::test_two'), 'FAILED');
  assert.equal(m.get('astropy/io/tests/test_a.py::test_three'), 'PASSED');
});

test('matplotlib: MouseButton enum reprs normalised', () => {
  const m = parseMatplotlib('PASSED lib/matplotlib/tests/test_widgets.py::test_span[MouseButton.LEFT]\n');
  assert.equal(m.get('lib/matplotlib/tests/test_widgets.py::test_span[1]'), 'PASSED');
});

test('seaborn: summary and progress lines', () => {
  const m = parseSeaborn(
    'tests/test_core.py::TestX::test_a PASSED\nFAILED tests/test_core.py::TestX::test_b - ValueError\n',
  );
  assert.equal(m.get('tests/test_core.py::TestX::test_a'), 'PASSED');
  assert.equal(m.get('tests/test_core.py::TestX::test_b'), 'FAILED');
});

const DJANGO = `Testing against Django installed in '/testbed/django'
Importing application migrations
Found 4 test(s).
Skipping setup of unused database(s): other.
System check identified no issues (0 silenced).
test_basic (migrations.test_operations.OperationTests) ... ok
test_skip (migrations.test_operations.OperationTests) ... skipped 'Database has feature(s) can_rollback_ddl'
test_rename (migrations.test_operations.OperationTests)
Tests the RenameModel operation. ... FAIL
test_bad (migrations.test_operations.OperationTests) ... ERROR
test_xf (migrations.test_operations.OperationTests) ... expected failure

======================================================================
FAIL: test_rename (migrations.test_operations.OperationTests)
Tests the RenameModel operation.
----------------------------------------------------------------------
Traceback (most recent call last):
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 5 tests in 0.101s

FAILED (failures=1, errors=1, skipped=1, expected failures=1)
`;

test('django --verbosity 2, docstring lines included', () => {
  const m = parseDjango(DJANGO);
  assert.equal(m.get('test_basic (migrations.test_operations.OperationTests)'), 'PASSED');
  assert.equal(m.get('test_skip (migrations.test_operations.OperationTests)'), 'SKIPPED');
  assert.equal(m.get('test_rename (migrations.test_operations.OperationTests)'), 'FAILED');
  assert.equal(m.get('test_bad (migrations.test_operations.OperationTests)'), 'ERROR');
  assert.equal(m.get('test_xf (migrations.test_operations.OperationTests)'), 'XFAIL');
});

const SYMPY = `============================= test process starts ==============================
executable:         /opt/miniconda3/envs/testbed/bin/python  (3.9.19-final-0) [CPython]
architecture:       64-bit
random seed:        12345

sympy/core/tests/test_basic.py[4]
test__aresame ok
test_structure ok
test_equality F
test_broken E                                                             [FAIL]

________________________________________________________________________________
_________ sympy/core/tests/test_basic.py:test_equality _________________________
Traceback (most recent call last):
AssertionError
========== tests finished: 2 passed, 1 failed, 1 exceptions, in 0.05 seconds ===
`;

test('sympy bin/test --verbose', () => {
  const m = parseSympy(SYMPY);
  assert.equal(m.get('test__aresame'), 'PASSED');
  assert.equal(m.get('test_structure'), 'PASSED');
  assert.equal(m.get('test_equality'), 'FAILED');
  assert.equal(m.get('test_broken'), 'ERROR');
});

const TAP = `TAP version 13
# Subtest: chunk splits evenly
ok 1 - chunk splits evenly
  ---
  duration_ms: 0.9
  ...
# Subtest: chunk keeps the partial tail
not ok 2 - chunk keeps the partial tail
  ---
  duration_ms: 1.2
  failureType: 'testCodeFailure'
  error: |-
    Expected values to be strictly deep-equal:
  ...
# Subtest: later
ok 3 - later # SKIP
  ---
  ...
# Subtest: grp
    # Subtest: inner \\# one
    ok 1 - inner \\# one
      ---
      ...
    1..1
ok 4 - grp
  ---
  type: 'suite'
  ...
1..4
# tests 4
# pass 2
# fail 1
`;

test('node test runner, TAP reporter, nested and skipped', () => {
  const m = parseNodeTest(TAP);
  assert.equal(m.get('chunk splits evenly'), 'PASSED');
  assert.equal(m.get('chunk keeps the partial tail'), 'FAILED');
  assert.equal(m.get('later'), 'SKIPPED');
  assert.equal(m.get('grp > inner # one'), 'PASSED');
  assert.equal(m.get('grp'), 'PASSED');
});

test('node test runner, spec reporter', () => {
  const spec =
    '✔ range counts up (0.5ms)\n✖ range counts down with a negative step (1.1ms)\n▶ grp\n  ✔ inner (0.1ms)\n✔ grp (0.4ms)\n﹣ skipped one (0.1ms) # SKIP\n';
  const m = parseNodeTest(spec);
  assert.equal(m.get('range counts up'), 'PASSED');
  assert.equal(m.get('range counts down with a negative step'), 'FAILED');
  assert.equal(m.get('grp > inner'), 'PASSED');
  assert.equal(m.get('skipped one'), 'SKIPPED');
});

test('parser names: swebench 5.x aliases resolve, unknown ones do not', () => {
  assert.equal(resolveParserName('parse_log_django'), 'django');
  assert.equal(resolveParserName('parse_log_pytest_v2'), 'pytest-v2');
  assert.equal(resolveParserName('nope'), null);
  assert.equal(getLogParser('node-test'), parseNodeTest);
});
