import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseDjango } from '../../../src/rollout/log-parsers/django.ts';
import { getLogParser, resolveParserName } from '../../../src/rollout/log-parsers/index.ts';
import { parseNodeTest } from '../../../src/rollout/log-parsers/node-test.ts';
import {
  parseMatplotlib,
  parsePytest,
  parsePytestOptions,
  parsePytestV2,
  parseSeaborn,
} from '../../../src/rollout/log-parsers/pytest.ts';
import { parseSympy } from '../../../src/rollout/log-parsers/sympy.ts';

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

test('pytest with options: ids cut at a space, absolute-path options shortened (official rules)', () => {
  const log =
    'PASSED tests/test_requests.py::test_x[a b c]\nFAILED tests/test_requests.py::test_y[http://a b] - AssertionError\n' +
    'PASSED tests/t.py::plain\nPASSED tests/t.py::test_p[/usr/lib/site.py]\nPASSED tests/t.py::test_p[//net/x]\n';
  for (const version of ['4.1', '5'] as const) {
    const m = parsePytestOptions(log, version);
    // swebench parse_log_pytest_options takes the second word, so a space cuts the id
    assert.equal(m.get('tests/test_requests.py::test_x[a'), 'PASSED');
    assert.equal(m.get('tests/test_requests.py::test_y[http://a'), 'FAILED');
    assert.equal(m.get('tests/t.py::plain'), 'PASSED');
    assert.equal(m.get('tests/t.py::test_p[/site.py]'), 'PASSED');
    assert.equal(m.get('tests/t.py::test_p[//net/x]'), 'PASSED');
    assert.equal(m.size, 5);
  }
  assert.equal(parsePytest(log).get('tests/test_requests.py::test_x[a'), 'PASSED');
});

test('pytest v2 (astropy): colour codes and verbose lines, 4.1 and 5.x', () => {
  const log =
    '\x1b[32mPASSED\x1b[0m astropy/io/tests/test_a.py::test_one\n' +
    'astropy/io/tests/test_a.py::test_two FAILED\n' +
    'astropy/io/tests/test_a.py::test_three PASSED [100%]\n' +
    'PASSED astropy/units/tests/test_f.py::test_fail[log(photon cm-2 s-1)]\n' +
    'FAILED astropy/t.py::test_m - assert a - b\n';
  const v4 = parsePytestV2(log, '4.1');
  assert.equal(v4.get('astropy/io/tests/test_a.py::test_one'), 'PASSED');
  assert.equal(v4.get('astropy/io/tests/test_a.py::test_two'), 'FAILED');
  // a line with a [100%] progress suffix does not end with a status: not read
  assert.equal(v4.has('astropy/io/tests/test_a.py::test_three'), false);
  // 4.1 keeps the second word: the truncated ids of SWE-bench Verified
  assert.equal(v4.get('astropy/units/tests/test_f.py::test_fail[log(photon'), 'PASSED');
  assert.equal(v4.get('astropy/t.py::test_m'), 'FAILED');
  const v5 = parsePytestV2(log, '5');
  assert.equal(v5.get('astropy/units/tests/test_f.py::test_fail[log(photon cm-2 s-1)]'), 'PASSED');
  assert.equal(v5.get('astropy/t.py::test_m'), 'FAILED');
});

test('matplotlib: MouseButton enum reprs normalised', () => {
  const m = parseMatplotlib('PASSED lib/matplotlib/tests/test_widgets.py::test_span[MouseButton.LEFT]\n');
  assert.equal(m.get('lib/matplotlib/tests/test_widgets.py::test_span[1]'), 'PASSED');
});

test('seaborn: only PASSED and FAILED are read; a tear-down ERROR leaves PASSED', () => {
  const m = parseSeaborn(
    'tests/test_core.py::TestX::test_a PASSED \ntests/test_core.py::TestX::test_c PASSED\n' +
      'FAILED tests/test_core.py::TestX::test_b - ValueError\nPASSED tests/test_core.py::TestX::test_d\n' +
      'ERROR tests/test_core.py::TestX::test_d - RuntimeError\nSKIPPED [1] tests/x.py:3: no\n',
  );
  assert.equal(m.get('tests/test_core.py::TestX::test_a'), 'PASSED');
  // the official test is `" PASSED " in line`: a progress line ending in PASSED is not read
  assert.equal(m.has('tests/test_core.py::TestX::test_c'), false);
  assert.equal(m.get('tests/test_core.py::TestX::test_b'), 'FAILED');
  assert.equal(m.get('tests/test_core.py::TestX::test_d'), 'PASSED');
  assert.equal(m.size, 3);
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

test('django --verbosity 2: a docstring line is the id, FAIL: headers add the bare name', () => {
  const m = parseDjango(DJANGO);
  assert.equal(m.get('test_basic (migrations.test_operations.OperationTests)'), 'PASSED');
  assert.equal(m.get('test_skip (migrations.test_operations.OperationTests)'), 'SKIPPED');
  assert.equal(m.get('Tests the RenameModel operation.'), 'FAILED');
  assert.equal(m.has('test_rename (migrations.test_operations.OperationTests)'), false);
  assert.equal(m.get('test_rename'), 'FAILED');
  assert.equal(m.get('test_bad (migrations.test_operations.OperationTests)'), 'ERROR');
  // swebench's parse_log_django records no `expected failure`
  assert.equal(m.has('test_xf (migrations.test_operations.OperationTests)'), false);
  assert.equal(m.size, 5);
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

test('sympy bin/test --verbose: status words at the line end, banners as path.py:name', () => {
  const m = parseSympy(SYMPY);
  assert.equal(m.get('test__aresame'), 'PASSED');
  assert.equal(m.get('test_structure'), 'PASSED');
  assert.equal(m.get('test_equality'), 'FAILED');
  // `test_broken E   [FAIL]` does not end with " E": not recorded officially
  assert.equal(m.has('test_broken'), false);
  assert.equal(m.get('sympy/core/tests/test_basic.py:test_equality'), 'FAILED');
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
