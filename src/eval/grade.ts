/**
 * Grading one patch in a fresh environment, as the SWE-bench harness does: apply the model patch
 * (three fallbacks), reset the test files and apply test_patch, run the tests between markers, parse
 * the log with the repository's parser. Resolved iff every FAIL_TO_PASS and PASS_TO_PASS test passed
 * (PASSED or XFAIL). Stricter than 4.x where 5.x is: a skipped FAIL_TO_PASS is a failure, and a
 * non-zero test exit with no failing test in the log is distrusted (reported, and not resolved).
 */
import type { SweInstance } from './dataset.ts';
import { getLogParser, type StatusMap } from './log-parsers/index.ts';
import { type ApplyResult, applyPatch, shellQuote } from './patch.ts';
import type { InstanceEnv, Runtime } from './runtime/types.ts';
import { diffFiles, specFor, testDirectives } from './specs.ts';

export const START_MARKER = '>>>>> Start Test Output';
export const END_MARKER = '>>>>> End Test Output';
const EXIT_MARKER = '>>>>> Test Exit Code: ';

export type GradeStatus = 'resolved' | 'unresolved' | 'empty_patch' | 'error';

export interface TestOutcome {
  passed: string[];
  failed: string[];
}

export interface GradeResult {
  status: GradeStatus;
  resolved: boolean;
  /** why not resolved (null when resolved) */
  reason: string | null;
  apply_method: string | null;
  fail_to_pass: TestOutcome;
  pass_to_pass: TestOutcome;
  test_exit_code: number | null;
  /** non-zero test exit with no failing test in the log */
  suspicious: boolean;
  durations_ms: { setup: number; apply: number; tests: number; parse: number };
  /** the raw test output (written to the run's logs/ folder) */
  log: string;
}

export interface GradeOptions {
  testTimeoutMs: number;
  /** run the tests for an empty patch too, instead of scoring it 0 outright (--grade-empty-patches) */
  gradeEmpty?: boolean;
}

const emptyOutcome = (): TestOutcome => ({ passed: [], failed: [] });

function result(partial: Partial<GradeResult> & { status: GradeStatus; reason: string | null }): GradeResult {
  return {
    resolved: partial.status === 'resolved',
    apply_method: null,
    fail_to_pass: emptyOutcome(),
    pass_to_pass: emptyOutcome(),
    test_exit_code: null,
    suspicious: false,
    durations_ms: { setup: 0, apply: 0, tests: 0, parse: 0 },
    log: '',
    ...partial,
  };
}

/** The eval script for rows without a 5.x eval_script: reset tests, apply test_patch, markers, tests. */
export function buildEvalScript(
  instance: SweInstance,
  testPatchFile: string,
  testCmd: string,
  directives: string[],
): string {
  const base = shellQuote(instance.base_commit);
  const files = diffFiles(instance.test_patch).map(shellQuote).join(' ');
  const reset = files
    ? `existing=$(git ls-tree -r --name-only ${base} -- ${files}); [ -z "$existing" ] || git checkout -q ${base} -- $existing`
    : 'true';
  return [
    'set -uo pipefail',
    reset,
    `git apply --verbose ${shellQuote(testPatchFile)} || { echo ">>>>> test_patch failed to apply"; exit 97; }`,
    `echo ${shellQuote(START_MARKER)}`,
    `${testCmd} ${directives.map(shellQuote).join(' ')}`,
    'code=$?',
    `echo ${shellQuote(END_MARKER)}`,
    `echo "${EXIT_MARKER}$code"`,
    reset,
  ].join('\n');
}

/** The part of a log between the markers, or null when either is missing. */
export function betweenMarkers(log: string): string | null {
  const start = log.indexOf(START_MARKER);
  if (start === -1) return null;
  const end = log.indexOf(END_MARKER, start);
  if (end === -1) return null;
  return log.slice(start + START_MARKER.length, end);
}

const passed = (s: string | undefined) => s === 'PASSED' || s === 'XFAIL';

/** Resolution from a parsed log (pure; unit-tested). */
export function decide(
  instance: Pick<SweInstance, 'FAIL_TO_PASS' | 'PASS_TO_PASS'>,
  statuses: StatusMap,
  testExitCode: number | null,
): Pick<GradeResult, 'status' | 'reason' | 'fail_to_pass' | 'pass_to_pass' | 'suspicious'> {
  const f2p = emptyOutcome();
  const p2p = emptyOutcome();
  for (const t of instance.FAIL_TO_PASS) (passed(statuses.get(t)) ? f2p.passed : f2p.failed).push(t);
  for (const t of instance.PASS_TO_PASS) {
    const s = statuses.get(t);
    // 4.x semantics for PASS_TO_PASS: a skip is not a failure (optional deps missing in some images)
    (passed(s) || s === 'SKIPPED' ? p2p.passed : p2p.failed).push(t);
  }
  const anyFailure = [...statuses.values()].some((s) => s === 'FAILED' || s === 'ERROR');
  const suspicious = testExitCode !== null && testExitCode !== 0 && !anyFailure;
  const describe = (kind: string, list: string[]) => {
    const shown = list.slice(0, 3).join(', ');
    const missing = list.filter((t) => !statuses.has(t)).length;
    return `${list.length} ${kind} failed (${shown}${list.length > 3 ? ', ...' : ''})${missing ? `, ${missing} missing from the log` : ''}`;
  };
  let reason: string | null = null;
  if (f2p.failed.length > 0) reason = describe('FAIL_TO_PASS', f2p.failed);
  else if (p2p.failed.length > 0) reason = describe('PASS_TO_PASS', p2p.failed);
  else if (suspicious)
    reason = `test command exited ${testExitCode} but no test failed in the log (suspicious)`;
  return {
    status: reason === null ? 'resolved' : 'unresolved',
    reason,
    fail_to_pass: f2p,
    pass_to_pass: p2p,
    suspicious,
  };
}

/** Grades a patch for an instance in a fresh environment from `runtime`. */
export async function gradePatch(
  runtime: Runtime,
  instance: SweInstance,
  patch: string,
  options: GradeOptions,
): Promise<GradeResult> {
  const empty = patch.trim() === '';
  if (empty && !options.gradeEmpty) return result({ status: 'empty_patch', reason: 'empty patch' });
  const spec = instance.eval_script ? null : specFor(instance);
  if (spec && 'error' in spec) return result({ status: 'error', reason: spec.error });
  const parserName = spec ? spec.parser : (instance.log_parser ?? 'pytest');
  const parser = getLogParser(parserName);
  if (!parser) return result({ status: 'error', reason: `unknown log parser "${parserName}"` });

  const t0 = performance.now();
  let env: InstanceEnv;
  try {
    env = await runtime.prepare(instance, 'grade');
  } catch (error) {
    return result({ status: 'error', reason: `grading environment: ${(error as Error).message}` });
  }
  const durations = { setup: performance.now() - t0, apply: 0, tests: 0, parse: 0 };
  try {
    const t1 = performance.now();
    const applied: ApplyResult = empty
      ? { applied: true, method: null, output: '' }
      : await applyPatch(env, patch);
    durations.apply = performance.now() - t1;
    if (!applied.applied) {
      return result({
        status: 'unresolved',
        reason: 'patch does not apply',
        durations_ms: durations,
        log: applied.output,
      });
    }
    let script: string;
    if (instance.eval_script) {
      script = instance.eval_script;
    } else {
      const s = spec as Exclude<ReturnType<typeof specFor>, { error: string }>;
      const testPatchFile = `${env.scratch}/polar-test.diff`;
      await env.writeFile(
        testPatchFile,
        instance.test_patch.endsWith('\n') ? instance.test_patch : `${instance.test_patch}\n`,
      );
      script = buildEvalScript(
        instance,
        testPatchFile,
        s.testCmd,
        testDirectives(instance.test_patch, s.directives),
      );
    }
    const t2 = performance.now();
    const run = await env.exec(script, { timeoutMs: options.testTimeoutMs });
    durations.tests = performance.now() - t2;
    const base = { apply_method: applied.method, durations_ms: durations, log: run.output };
    if (run.timedOut) {
      return result({
        ...base,
        status: 'unresolved',
        reason: `tests timed out after ${Math.round(options.testTimeoutMs / 1000)}s`,
      });
    }
    if (run.exitCode === 97 && run.output.includes('test_patch failed to apply')) {
      return result({
        ...base,
        status: 'error',
        reason: 'test_patch does not apply (dataset or environment problem)',
      });
    }
    const t3 = performance.now();
    const section = betweenMarkers(run.output);
    if (section === null) {
      durations.parse = performance.now() - t3;
      return result({
        ...base,
        status: 'unresolved',
        reason: 'test output markers missing (the test run did not complete)',
      });
    }
    const exitMatch = new RegExp(`${EXIT_MARKER.replace(/[>]/g, '\\>')}(\\d+)`).exec(run.output);
    const testExit = exitMatch ? Number(exitMatch[1]) : null;
    const decision = decide(instance, parser(section), testExit);
    durations.parse = performance.now() - t3;
    return result({ ...base, ...decision, test_exit_code: testExit });
  } catch (error) {
    return result({
      status: 'error',
      reason: `grading failed: ${(error as Error).message}`,
      durations_ms: durations,
    });
  } finally {
    await env.dispose().catch(() => {});
  }
}
