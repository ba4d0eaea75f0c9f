/**
 * Grading a test run's statuses (pure): from a whole eval log (`gradeLog`, what `polar grade`, the
 * regrade and the runs without a structured report read), or from an evaluation already made
 * (`gradeEvaluation`: a hardened run's report, src/rollout/integrity/). `official` semantics follow the
 * official version of the row exactly; `polar` (what polar eval does) adds the two 5.x guards on 4.1
 * rows (docs/eval.md, "Deliberate differences"); `xfailFails` (--reject-test-tampering) counts an XFAIL
 * of an expected test as failed.
 */
import type { SweInstance } from './dataset.ts';
import { getLogParser } from './log-parsers/index.ts';
import type { ParserVersion, Semantics, StatusMap } from './log-parsers/types.ts';
import {
  evaluateLog,
  hasFailure,
  type LogEvaluation,
  officialRules,
  type ResolutionRules,
  resolve,
  type TestOutcome,
} from './resolve.ts';
import { specFor } from './specs.ts';

export interface LogGrade {
  resolved: boolean;
  reason: string | null;
  /** false when the log shows no usable test run (official `found`) */
  found: boolean;
  tests: StatusMap;
  fail_to_pass: TestOutcome;
  pass_to_pass: TestOutcome;
  test_exit_code: number | null;
  suspicious: boolean;
  parser: string;
  rules: ResolutionRules;
}

export type GradeLogInstance = Pick<SweInstance, 'repo' | 'FAIL_TO_PASS' | 'PASS_TO_PASS'> &
  Partial<Pick<SweInstance, 'eval_script' | 'eval_type' | 'log_parser' | 'test_cmd' | 'version'>>;

export interface GradeLogOptions {
  parser?: string;
  semantics?: Semantics;
  version?: ParserVersion;
  /** an XFAIL of a FAIL_TO_PASS or PASS_TO_PASS test fails (--reject-test-tampering) */
  xfailFails?: boolean;
}

export const emptyOutcome = (): TestOutcome => ({ passed: [], failed: [], uncounted: [] });

/** The parser a row is read with: its 5.x log_parser, else the repository's (specs.ts). */
export function parserFor(instance: GradeLogInstance): string | { error: string } {
  if (instance.eval_script) return instance.log_parser ?? 'pytest';
  const spec = specFor(instance as SweInstance);
  return 'error' in spec ? spec : spec.parser;
}

/** The rules a row is graded by under `options`. */
export function gradingRules(instance: GradeLogInstance, options: GradeLogOptions = {}): ResolutionRules {
  const official = officialRules(instance);
  const rules: ResolutionRules = { ...official, version: options.version ?? official.version };
  if ((options.semantics ?? 'polar') === 'polar' && rules.version === '4.1')
    rules.skippedFailToPassFails = true;
  if (options.xfailFails) rules.xfailFails = true;
  return rules;
}

/** Grades a whole eval log. */
export function gradeLog(
  instance: GradeLogInstance,
  content: string,
  options: GradeLogOptions = {},
): LogGrade | { error: string } {
  const name = options.parser ?? parserFor(instance);
  if (typeof name !== 'string') return name;
  const parser = getLogParser(name);
  if (!parser) return { error: `unknown log parser "${name}"` };
  const rules = gradingRules(instance, options);
  return gradeEvaluation(instance, evaluateLog(content, parser, rules.version), name, rules);
}

/** Grades an evaluation (a status map, whether the run was found, its exit code) by `rules`. */
export function gradeEvaluation(
  instance: GradeLogInstance,
  ev: LogEvaluation,
  parser: string,
  rules: ResolutionRules,
): LogGrade {
  const guards = Boolean(rules.skippedFailToPassFails) && rules.version === '4.1';
  const base = { tests: ev.tests, test_exit_code: ev.exitCode, parser, rules, found: ev.found };
  if (!ev.found) {
    return {
      ...base,
      resolved: false,
      reason: ev.reason,
      fail_to_pass: emptyOutcome(),
      pass_to_pass: emptyOutcome(),
      suspicious: ev.reason?.includes('suspicious') ?? false,
    };
  }
  const r = resolve(instance, ev.tests, rules);
  const suspicious = guards && ev.exitCode !== null && ev.exitCode !== 0 && !hasFailure(ev.tests);
  const describe = (kind: string, list: string[]) => {
    const shown = list.slice(0, 3).join(', ');
    const missing = list.filter((t) => !ev.tests.has(t)).length;
    return `${list.length} ${kind} failed (${shown}${list.length > 3 ? ', ...' : ''})${missing ? `, ${missing} missing from the log` : ''}`;
  };
  let reason: string | null = null;
  if (r.fail_to_pass.failed.length > 0) reason = describe('FAIL_TO_PASS', r.fail_to_pass.failed);
  else if (r.pass_to_pass.failed.length > 0) reason = describe('PASS_TO_PASS', r.pass_to_pass.failed);
  else if (suspicious)
    reason = `test command exited ${ev.exitCode} but no test failed in the log (suspicious)`;
  return {
    ...base,
    resolved: reason === null,
    reason,
    fail_to_pass: r.fail_to_pass,
    pass_to_pass: r.pass_to_pass,
    suspicious,
  };
}
