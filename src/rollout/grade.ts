/**
 * Grading one patch in a fresh environment, as the SWE-bench harness does: apply the model patch
 * (three fallbacks), set the environment up, reset the test files and apply test_patch, run the tests
 * between markers, then read the log (resolve.ts) with the rules of the official version that grades
 * the row: v4.1.0 for rows without an eval_script, v5.x for rows that carry one. On 4.1 rows polar adds
 * two 5.x guards (a skipped FAIL_TO_PASS fails; a non-zero test exit with no failing test in the log is
 * distrusted): see docs/eval.md, "Deliberate differences".
 */

import type { SweInstance } from './dataset.ts';
import { EnvBuildError } from './env/types.ts';
import type { ExecResult } from './exec.ts';
import { getLogParser } from './log-parsers/index.ts';
import type { ParserVersion, Semantics, StatusMap } from './log-parsers/types.ts';
import { type ApplyResult, applyPatch, shellQuote } from './patch.ts';
import {
  END_MARKER,
  evaluateLog,
  hasFailure,
  officialRules,
  type ResolutionRules,
  resolve,
  START_MARKER,
  TEST_EXIT_CODE,
  type TestOutcome,
} from './resolve.ts';
import type { InstanceEnv, Runtime } from './runtime/types.ts';
import { diffFiles, specFor, testDirectives } from './specs.ts';
import { detectTampering, type Tampering } from './tampering.ts';

/** A graded sample's outcome (results.jsonl `status`, the report's `counts`). */
export const GRADE_STATUSES = ['resolved', 'unresolved', 'empty_patch', 'error'] as const;
export type GradeStatus = (typeof GRADE_STATUSES)[number];

export interface GradeResult {
  status: GradeStatus;
  resolved: boolean;
  /** why not resolved (null when resolved) */
  reason: string | null;
  apply_method: string | null;
  fail_to_pass: TestOutcome;
  pass_to_pass: TestOutcome;
  test_exit_code: number | null;
  /** non-zero test exit with no failing test in the log, or a patch that changes how the tests run */
  suspicious: boolean;
  /** the patch's files that change how the tests run (src/rollout/tampering.ts), or null */
  tampering: Tampering | null;
  /** the official version whose rules graded the row */
  official_version: ParserVersion | null;
  /** install: the per-sample install of a polar-built environment (src/rollout/env/) */
  durations_ms: { setup: number; apply: number; install: number; tests: number; parse: number };
  /** the raw test output, after the environment install's output (written to the run's logs/ folder) */
  log: string;
  /** the cached environment the tests ran in (src/rollout/env/), or null */
  environment: string | null;
  /** the log of an environment build that failed (written to the run's logs/ folder as <sample>.env.log) */
  env_log?: string;
}

export interface GradeOptions {
  testTimeoutMs: number;
  /** run the tests for an empty patch too, instead of scoring it 0 outright (--grade-empty-patches) */
  gradeEmpty?: boolean;
  /** grade a patch that changes how the tests run 0 without running them (--reject-test-tampering) */
  rejectTampering?: boolean;
  /**
   * a cancelled sample (polar loop --overdue drop) or an interrupt: the test run is ended and the grade is
   * an `error` no one records (the caller discards a cancelled sample)
   */
  signal?: AbortSignal;
}

const cancelled = (durations?: Durations, environment?: string | null): GradeResult =>
  result({
    status: 'error',
    reason: 'grading cancelled',
    ...(durations ? { durations_ms: durations } : {}),
    ...(environment !== undefined ? { environment } : {}),
  });

const emptyOutcome = (): TestOutcome => ({ passed: [], failed: [], uncounted: [] });

function result(partial: Partial<GradeResult> & { status: GradeStatus; reason: string | null }): GradeResult {
  return {
    resolved: partial.status === 'resolved',
    apply_method: null,
    fail_to_pass: emptyOutcome(),
    pass_to_pass: emptyOutcome(),
    test_exit_code: null,
    suspicious: false,
    tampering: null,
    official_version: null,
    durations_ms: { setup: 0, apply: 0, install: 0, tests: 0, parse: 0 },
    log: '',
    environment: null,
    ...partial,
  };
}

/**
 * The eval script for rows without a 5.x eval_script: set-up, reset tests, apply test_patch, markers,
 * tests, the test command's exit code after the end marker, reset. Unlike the official script, a
 * test_patch that does not apply stops it (exit 97): polar reports that as an error of the dataset or
 * environment instead of grading the tests of the unpatched files. Test files are quoted (a path with
 * spaces stays one argument; the official script joins them unquoted).
 */
export function buildEvalScript(
  instance: SweInstance,
  testPatchFile: string,
  testCmd: string,
  directives: string[],
  setup: string[] = [],
): string {
  const base = shellQuote(instance.base_commit);
  const files = diffFiles(instance.test_patch).map(shellQuote).join(' ');
  const reset = files
    ? `existing=$(git ls-tree -r --name-only ${base} -- ${files}); [ -z "$existing" ] || git checkout -q ${base} -- $existing`
    : 'true';
  return [
    'set -uo pipefail',
    ...setup,
    reset,
    `git apply --verbose ${shellQuote(testPatchFile)} || { echo ">>>>> test_patch failed to apply"; exit 97; }`,
    `echo ${shellQuote(START_MARKER)}`,
    `${testCmd} ${directives.map(shellQuote).join(' ')}`,
    'code=$?',
    `echo ${shellQuote(END_MARKER)}`,
    `echo "${TEST_EXIT_CODE}: $code"`,
    reset,
  ].join('\n');
}

/**
 * A 5.x row's eval_script as the harness runs it (v5.0.1 harness/utils.py parse_eval_script and
 * record_test_exit_code, types.py TestSpec.eval_script): shebang and `set -uxo pipefail` lines dropped
 * and put back in front, and the test command's `$?` saved before the first line naming the end
 * marker and echoed after it. A script without that line is left as it is.
 */
export function withExitCodeCapture(evalScript: string): string {
  const lines = evalScript
    .trim()
    .split('\n')
    .filter((l) => l !== '#!/bin/bash' && l !== 'set -uxo pipefail');
  const at = lines.findIndex((l) => l.includes(END_MARKER));
  const body =
    at === -1
      ? lines
      : [
          ...lines.slice(0, at),
          'SWEBENCH_TEST_EXIT_CODE=$?',
          lines[at]!,
          `echo "${TEST_EXIT_CODE}: $SWEBENCH_TEST_EXIT_CODE"`,
          ...lines.slice(at + 1),
        ];
  return `${['#!/bin/bash', 'set -uxo pipefail', ...body].join('\n')}\n`;
}

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

/** The parser a row is read with: its 5.x log_parser, else the repository's (specs.ts). */
export function parserFor(instance: GradeLogInstance): string | { error: string } {
  if (instance.eval_script) return instance.log_parser ?? 'pytest';
  const spec = specFor(instance as SweInstance);
  return 'error' in spec ? spec : spec.parser;
}

/**
 * Grades a whole eval log (pure): `official` follows the official version of the row exactly,
 * `polar` (what polar eval does) adds the two guards on 4.1 rows.
 */
export function gradeLog(
  instance: GradeLogInstance,
  content: string,
  options: { parser?: string; semantics?: Semantics; version?: ParserVersion } = {},
): LogGrade | { error: string } {
  const name = options.parser ?? parserFor(instance);
  if (typeof name !== 'string') return name;
  const parser = getLogParser(name);
  if (!parser) return { error: `unknown log parser "${name}"` };
  const official = officialRules(instance);
  const rules: ResolutionRules = { ...official, version: options.version ?? official.version };
  const guards = (options.semantics ?? 'polar') === 'polar' && rules.version === '4.1';
  if (guards) rules.skippedFailToPassFails = true;
  const ev = evaluateLog(content, parser, rules.version);
  const base = { tests: ev.tests, test_exit_code: ev.exitCode, parser: name, rules, found: ev.found };
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

type Spec = Exclude<ReturnType<typeof specFor>, { error: string }>;
type Durations = GradeResult['durations_ms'];

/** The script that runs the tests: the row's 5.x eval_script, or polar's from the spec. */
async function evalScriptFor(instance: SweInstance, spec: Spec | null, env: InstanceEnv): Promise<string> {
  if (instance.eval_script || !spec) return withExitCodeCapture(instance.eval_script ?? '');
  const testPatchFile = `${env.scratch}/polar-test.diff`;
  await env.writeFile(
    testPatchFile,
    instance.test_patch.endsWith('\n') ? instance.test_patch : `${instance.test_patch}\n`,
  );
  return buildEvalScript(
    instance,
    testPatchFile,
    spec.testCmd,
    testDirectives(instance.test_patch, spec.directives),
    env.envSetup?.(spec.setup) ?? [],
  );
}

/** whether the install step works on the unpatched tree, per environment and instance (asked once) */
const baseInstalls = new Map<string, Promise<boolean>>();

function baseInstallWorks(runtime: Runtime, instance: SweInstance, envKey: string): Promise<boolean> {
  const key = `${envKey}\0${instance.instance_id}`;
  let works = baseInstalls.get(key);
  if (!works) {
    works = (async () => {
      const base = await runtime.prepare(instance, 'grade');
      try {
        return (await base.environment?.install())?.ok ?? false;
      } finally {
        await base.dispose().catch(() => {});
      }
    })().catch(() => false);
    baseInstalls.set(key, works);
  }
  return works;
}

/**
 * The per-sample install of a polar-built environment, after the patch: its output (the log's head), or
 * the result when it fails: `unresolved` when the same step works on the unpatched tree (the patch broke
 * it), an infrastructure `error` when it does not.
 */
async function installSample(
  runtime: Runtime,
  instance: SweInstance,
  env: InstanceEnv,
  durations: Durations,
): Promise<string | GradeResult> {
  const environment = env.environment;
  if (!environment) return '';
  const installed = await environment.install();
  durations.install = installed.durationMs;
  if (installed.ok) return installed.output;
  const patchBroke = await baseInstallWorks(runtime, instance, environment.cached.key);
  return result({
    status: patchBroke ? 'unresolved' : 'error',
    reason: patchBroke
      ? `the patch breaks the repository's install step (${installed.step})`
      : `environment ${environment.cached.name}: the install step fails on the unpatched tree too (${installed.step})`,
    durations_ms: durations,
    log: installed.output,
    environment: environment.cached.name,
  });
}

/**
 * Grades a patch for an instance in a fresh environment from `runtime`. A patch that changes how the
 * tests run is flagged `suspicious` with its `tampering` files, and with `rejectTampering` graded 0
 * (unresolved) without running the tests.
 */
export async function gradePatch(
  runtime: Runtime,
  instance: SweInstance,
  patch: string,
  options: GradeOptions,
): Promise<GradeResult> {
  const tampering = detectTampering(patch, instance.test_patch);
  if (tampering && options.rejectTampering) {
    return result({
      status: 'unresolved',
      reason: `rejected (--reject-test-tampering): ${tampering.reason} (${tampering.files.join(', ')})`,
      suspicious: true,
      tampering: { ...tampering, rejected: true },
    });
  }
  const graded = await gradeTests(runtime, instance, patch, options);
  return tampering ? { ...graded, suspicious: true, tampering } : graded;
}

async function gradeTests(
  runtime: Runtime,
  instance: SweInstance,
  patch: string,
  options: GradeOptions,
): Promise<GradeResult> {
  const empty = patch.trim() === '';
  if (empty && !options.gradeEmpty) return result({ status: 'empty_patch', reason: 'empty patch' });
  const spec = instance.eval_script ? null : specFor(instance);
  if (spec && 'error' in spec) return result({ status: 'error', reason: spec.error });
  const parserName = parserFor(instance);
  if (typeof parserName !== 'string') return result({ status: 'error', reason: parserName.error });
  if (!getLogParser(parserName))
    return result({ status: 'error', reason: `unknown log parser "${parserName}"` });

  const t0 = performance.now();
  let env: InstanceEnv;
  try {
    env = await runtime.prepare(instance, 'grade');
  } catch (error) {
    const envLog = error instanceof EnvBuildError ? { env_log: error.log } : {};
    return result({ status: 'error', reason: `grading environment: ${(error as Error).message}`, ...envLog });
  }
  const durations: Durations = { setup: performance.now() - t0, apply: 0, install: 0, tests: 0, parse: 0 };
  const environment = env.environment?.cached.name ?? null;
  try {
    if (options.signal?.aborted) return cancelled(durations, environment);
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
        environment,
      });
    }
    if (options.signal?.aborted) return cancelled(durations, environment);
    const installed = await installSample(runtime, instance, env, durations);
    if (typeof installed !== 'string') return installed;
    const script = await evalScriptFor(instance, spec as Spec | null, env);
    if (options.signal?.aborted) return cancelled(durations, environment);
    const t2 = performance.now();
    const run = await env.exec(script, {
      timeoutMs: options.testTimeoutMs,
      ...(env.environment ? { env: env.environment.guardEnv() } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    durations.tests = performance.now() - t2;
    if (run.cancelled || options.signal?.aborted) return cancelled(durations, environment);
    const base = {
      apply_method: applied.method,
      durations_ms: durations,
      log: installed + run.output,
      environment,
    };
    const testCmd = instance.eval_script ? null : ((spec as Spec | null)?.testCmd ?? null);
    return await judgeRun({ instance, env, run, testCmd }, base, options, durations);
  } catch (error) {
    return result({
      status: 'error',
      reason: `grading failed: ${(error as Error).message}`,
      durations_ms: durations,
      environment,
    });
  } finally {
    await env.dispose().catch(() => {});
  }
}

/** The result of a test run: timeouts, a test_patch that did not apply, the import guard, then the log. */
async function judgeRun(
  {
    instance,
    env,
    run,
    testCmd,
  }: { instance: SweInstance; env: InstanceEnv; run: ExecResult; testCmd: string | null },
  base: Pick<GradeResult, 'apply_method' | 'durations_ms' | 'log' | 'environment'>,
  options: GradeOptions,
  durations: Durations,
): Promise<GradeResult> {
  if (run.exitCode === 97 && run.output.includes('test_patch failed to apply')) {
    return result({
      ...base,
      status: 'error',
      reason: 'test_patch does not apply (dataset or environment problem)',
    });
  }
  const t3 = performance.now();
  const graded = run.timedOut ? null : gradeLog(instance, run.output);
  durations.parse = performance.now() - t3;
  // the guard first: a run that tested an installed copy has no score, whatever its log says
  if (env.environment) {
    const tests = graded && !('error' in graded) ? [...graded.tests.values()] : [];
    const passed = tests.some((t) => t === 'PASSED' || t === 'XFAIL');
    const violation = await env.environment.checkGuard({ passed, testCmd });
    if (violation) return result({ ...base, status: 'error', reason: `import guard: ${violation.message}` });
  }
  if (run.timedOut || graded === null) {
    return result({
      ...base,
      status: 'unresolved',
      reason: `tests timed out after ${Math.round(options.testTimeoutMs / 1000)}s`,
    });
  }
  if ('error' in graded) return result({ ...base, status: 'error', reason: graded.error });
  return result({
    ...base,
    status: graded.resolved ? 'resolved' : 'unresolved',
    reason: graded.reason,
    fail_to_pass: graded.fail_to_pass,
    pass_to_pass: graded.pass_to_pass,
    suspicious: graded.suspicious,
    test_exit_code: graded.test_exit_code,
    official_version: graded.rules.version,
  });
}
