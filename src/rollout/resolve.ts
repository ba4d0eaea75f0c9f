/**
 * From a test log to `resolved`, as the official harness decides it (pure; unit-tested on logs from
 * real runners against the official code's own output, fixtures/swe-logs). Two sets of rules:
 * - '4.1': SWE-bench/SWE-bench tag v4.1.0, swebench/harness/grading.py (get_logs_eval,
 *   get_eval_tests_report, get_resolution_status): the rows without an eval_script (SWE-bench Verified
 *   as published);
 * - '5': tag v5.0.1, the same file: rows that carry their own eval_script / log_parser / eval_type.
 *   It adds the suite-ran and test-exit-code checks, prefix matching of truncated ids
 *   (`_resolve_case`), a skipped FAIL_TO_PASS as a failure, and a skipped PASS_TO_PASS as maintained.
 * polar's own grading of 4.1 rows adds two 5.x guards (docs/eval.md, "Deliberate differences").
 */
import { beforeFirst, PY_SPACE } from './log-parsers/python-str.ts';
import type { LogParser, ParserVersion, StatusMap } from './log-parsers/types.ts';

// harness/constants/__init__.py (v4.1.0 and v5.0.1)
export const START_MARKER = '>>>>> Start Test Output';
export const END_MARKER = '>>>>> End Test Output';
export const TEST_EXIT_CODE = '>>>>> Test Exit Code';
const BAD_CODES = [
  '>>>>> Patch Apply Failed',
  '>>>>> Reset Failed',
  '>>>>> Tests Errored',
  '>>>>> Tests Timed Out',
];
/** v4.1.0 constants FAIL_ONLY_REPOS: graded fail-only by repository (5.x rows name eval_type) */
export const FAIL_ONLY_REPOS = new Set(['chartjs/Chart.js', 'processing/p5.js', 'markedjs/marked']);

// v5.0.1 grading.py SUITE_RAN: evidence that a runner executed when nothing was parsed
const N = '[1-9][0-9]*';
const SUITE_RAN = new RegExp(
  [
    `Executed ${N} of [0-9]+`,
    `TOTAL: ${N} (?:SUCCESS|FAILED)`,
    `${N} passing`,
    `Tests:[${PY_SPACE}]+${N}`,
    `Test Suites:[${PY_SPACE}]+(?:[0-9]+ [\\p{L}\\p{N}_]+, )*${N} total`,
    `(?<=^|\\n)# tests ${N}`,
    `${N} specs?, [0-9]+ failures?`,
    `': ok(?=\\n|$)`,
  ].join('|'),
  'u',
);
const EXIT_CODE = new RegExp(`${TEST_EXIT_CODE}:[${PY_SPACE}]*(-?[0-9]+)`);

/** `content.split(START)[1].split(END)[0]`, or null without both markers */
export function betweenMarkers(content: string): string | null {
  if (!content.includes(START_MARKER) || !content.includes(END_MARKER)) return null;
  return beforeFirst(content.split(START_MARKER)[1]!, END_MARKER);
}

/** v5.0.1 parse_test_exit_code: the test command's own status recorded after the end marker */
export function testExitCode(content: string): number | null {
  const m = EXIT_CODE.exec(content);
  return m ? Number(m[1]) : null;
}

export interface LogEvaluation {
  /** false: the log shows no usable test run (the official `found`); never resolved */
  found: boolean;
  tests: StatusMap;
  /** why found is false */
  reason: string | null;
  exitCode: number | null;
}

/** get_logs_eval: the status map of a whole eval log (markers, fallback, and the 5.x checks). */
export function evaluateLog(content: string, parser: LogParser, version: ParserVersion): LogEvaluation {
  const exitCode = testExitCode(content);
  const none = (reason: string): LogEvaluation => ({ found: false, tests: new Map(), reason, exitCode });
  const bad = BAD_CODES.find((code) => content.includes(code));
  if (bad) return none(`the log says "${bad}"`);
  const section = betweenMarkers(content);
  if (section === null) return none('test output markers missing (the test run did not complete)');
  let tests = parser(section, version);
  // both versions: a runner printing outside the markers (stdout/stderr order) is read in the whole log
  if (tests.size === 0) tests = parser(content, version);
  if (version === '5') {
    if (tests.size === 0 && !SUITE_RAN.test(content))
      return none('no test result in the log and no sign that the test suite ran');
    if (exitCode !== null && exitCode !== 0 && tests.size > 0 && !hasFailure(tests))
      return none(`the tests exited ${exitCode} but the log shows no failing test (suspicious)`);
  }
  return { found: true, tests, reason: null, exitCode };
}

export function hasFailure(tests: StatusMap): boolean {
  for (const s of tests.values()) if (s === 'FAILED' || s === 'ERROR') return true;
  return false;
}

export interface ResolutionRules {
  version: ParserVersion;
  evalType: 'pass_and_fail' | 'fail_only';
  /** polar's guard on 4.1 rows: a skipped FAIL_TO_PASS test fails (the 5.x rule) */
  skippedFailToPassFails?: boolean;
  /**
   * --reject-test-tampering: an XFAIL of a FAIL_TO_PASS or PASS_TO_PASS test fails (officially it passes;
   * the code under test can mark a failing test as an expected failure: `pytest.xfail()`)
   */
  xfailFails?: boolean;
}

export interface TestOutcome {
  /** the official `success` list */
  passed: string[];
  /** the official `failure` list */
  failed: string[];
  /** in neither list (4.1: a skipped test; any: a status word outside the five), not counted */
  uncounted: string[];
}

const PASSING = new Set(['PASSED', 'XFAIL']);

/** v5.0.1 _resolve_case: exact id, else a truncated `x[...` id by prefix when all candidates agree */
function resolveCase(id: string, tests: StatusMap, prefix: boolean): string | null {
  if (tests.has(id)) return id;
  if (!prefix) return null;
  if (id.split('[').length <= id.split(']').length) return null;
  const matches = [...tests.keys()].filter((k) => k.startsWith(id));
  if (matches.length === 0) return null;
  const outcomes = new Set(matches.map((k) => PASSING.has(tests.get(k)!)));
  return outcomes.size === 1 ? matches[0]! : null;
}

/** get_eval_tests_report for one list. */
function judge(ids: string[], tests: StatusMap, rules: ResolutionRules, kind: 'f2p' | 'p2p'): TestOutcome {
  const out: TestOutcome = { passed: [], failed: [], uncounted: [] };
  const v5 = rules.version === '5';
  for (const id of ids) {
    if (rules.evalType === 'fail_only') {
      // check_fail_only: exact id only; failed iff recorded as FAILED
      (tests.get(id) === 'FAILED' ? out.failed : out.passed).push(id);
      continue;
    }
    const key = resolveCase(id, tests, v5);
    const status = key === null ? undefined : tests.get(key);
    const skippedFails = kind === 'f2p' && (v5 || Boolean(rules.skippedFailToPassFails));
    if (rules.xfailFails && status === 'XFAIL') out.failed.push(id);
    else if (status !== undefined && PASSING.has(status)) out.passed.push(id);
    else if (kind === 'p2p' && v5 && status === 'SKIPPED')
      out.passed.push(id); // test_maintained
    else if (
      status === undefined ||
      status === 'FAILED' ||
      status === 'ERROR' ||
      (skippedFails && status === 'SKIPPED')
    )
      out.failed.push(id);
    else out.uncounted.push(id);
  }
  return out;
}

export interface Resolution {
  resolved: boolean;
  fail_to_pass: TestOutcome;
  pass_to_pass: TestOutcome;
}

/** get_resolution_status == RESOLVED_FULL: both rates 1 (an empty list counts as 1). */
export function resolve(
  instance: { FAIL_TO_PASS: string[]; PASS_TO_PASS: string[] },
  tests: StatusMap,
  rules: ResolutionRules,
): Resolution {
  const f2p = judge(instance.FAIL_TO_PASS, tests, rules, 'f2p');
  const p2p = judge(instance.PASS_TO_PASS, tests, rules, 'p2p');
  return {
    resolved: f2p.failed.length === 0 && p2p.failed.length === 0,
    fail_to_pass: f2p,
    pass_to_pass: p2p,
  };
}

/** The rules a row is graded by officially: 5.x when it carries an eval_script, else 4.1. */
export function officialRules(instance: {
  repo: string;
  eval_script?: string;
  eval_type?: string;
}): ResolutionRules {
  const version: ParserVersion = instance.eval_script ? '5' : '4.1';
  const failOnly =
    instance.eval_type === 'fail_only' ||
    (version === '4.1' && instance.eval_type === undefined && FAIL_ONLY_REPOS.has(instance.repo));
  return { version, evalType: failOnly ? 'fail_only' : 'pass_and_fail' };
}
