/**
 * Grading one patch in a fresh environment, as the SWE-bench harness does: apply the model patch
 * (three fallbacks), set the environment up, reset the test files and apply test_patch, run the tests
 * between markers, then read the result with the rules of the official version that grades the row:
 * v4.1.0 for rows without an eval_script, v5.x for rows that carry one. On 4.1 rows polar adds two 5.x
 * guards (a skipped FAIL_TO_PASS fails; a non-zero test exit with no failing test in the log is
 * distrusted): see docs/eval.md, "Deliberate differences". Rows without an eval_script run through the
 * integrity layers (src/rollout/integrity/): the whole test surface restored, a locked-down runner, a
 * structured report, canaries; docs/eval.md, "Grading integrity".
 */
import type { SweInstance } from './dataset.ts';
import { installCause, installRequested } from './env/layer.ts';
import { EnvBuildError } from './env/types.ts';
import { evalScriptFor } from './eval-script.ts';
import {
  emptyOutcome,
  gradeEvaluation,
  gradeLog,
  gradingRules,
  type LogGrade,
  parserFor,
} from './grade-log.ts';
import { describeFinding, type Finding, tamperingRecord } from './integrity/findings.ts';
import { type IntegrityRecord, runHardenedTests } from './integrity/grade-run.ts';
import { scanPatch } from './integrity/scan.ts';
import { getLogParser } from './log-parsers/index.ts';
import type { ParserVersion } from './log-parsers/types.ts';
import { type ApplyResult, applyPatch } from './patch.ts';
import type { TestOutcome } from './resolve.ts';
import type { InstanceEnv, Runtime } from './runtime/types.ts';
import { specFor } from './specs.ts';
import { type Tampering, tamperedFiles } from './tampering.ts';

export { buildEvalScript, withExitCodeCapture } from './eval-script.ts';
export { type GradeLogInstance, gradeLog, type LogGrade, parserFor } from './grade-log.ts';

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
  /** a hardened run's runner, exit status, canaries and report (logs/<sample>.integrity.json) */
  integrity?: IntegrityRecord;
}

export interface GradeOptions {
  testTimeoutMs: number;
  /** run the tests for an empty patch too, instead of scoring it 0 outright (--grade-empty-patches) */
  gradeEmpty?: boolean;
  /**
   * grade a flagged patch 0 (--reject-test-tampering; polar loop's and polar gym's default): a patch the
   * scan flags is not run; an XFAIL of an expected test fails
   */
  rejectTampering?: boolean;
  /**
   * the integrity layers of the test run (default on): false runs the tests as the official script does
   * (the benchmark's baseline, and tests that show an attack's raw log)
   */
  hardened?: boolean;
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

type Spec = Exclude<ReturnType<typeof specFor>, { error: string }>;
type Durations = GradeResult['durations_ms'];

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
  patch: string,
  durations: Durations,
): Promise<string | GradeResult> {
  const environment = env.environment;
  if (!environment) return '';
  const installed = await environment.install({ patch });
  durations.install = installed.durationMs;
  if (installed.ok) return installed.output;
  const patchBroke = await baseInstallWorks(runtime, instance, environment.cached.key);
  const cause = installCause(installed.output, installRequested(environment.cached));
  return result({
    status: patchBroke ? 'unresolved' : 'error',
    reason: patchBroke
      ? `the patch breaks the repository's install step (${installed.step})`
      : `environment ${environment.cached.name}: the install step fails on the unpatched tree too (${installed.step})${cause ? `: ${cause}` : ''}`,
    durations_ms: durations,
    log: installed.output,
    environment: environment.cached.name,
  });
}

/**
 * Grades a patch for an instance in a fresh environment from `runtime`, through the integrity layers
 * (src/rollout/integrity/, docs/eval.md "Grading integrity"): the patch's findings (files that change how
 * the tests run, code that reaches into the runner, entry-point metadata) flag it, and with
 * `rejectTampering` grade it 0 without running the tests; a run whose canaries, exit status or report
 * prove tampering is graded 0 in every mode; other run findings (an expected test passed as XFAIL) flag.
 */
export async function gradePatch(
  runtime: Runtime,
  instance: SweInstance,
  patch: string,
  options: GradeOptions,
): Promise<GradeResult> {
  const layers = options.hardened !== false;
  const named: Finding[] = tamperedFiles(patch, instance.test_patch).map((f) => ({
    layer: 'test-surface',
    file: f.file,
    reason: f.reason,
  }));
  const found = layers ? [...named, ...scanPatch(patch)] : named;
  const reject = Boolean(options.rejectTampering);
  const before = tamperingRecord(found, reject);
  if (before && reject) {
    return result({
      status: 'unresolved',
      reason: `rejected (--reject-test-tampering): ${before.reason} (${before.files.join(', ')})`,
      suspicious: true,
      tampering: before,
    });
  }
  const { grade, findings } = await gradeTests(runtime, instance, patch, options);
  const tampering = tamperingRecord([...found, ...findings], reject);
  if (!tampering) return grade;
  const graded: GradeResult = { ...grade, suspicious: true, tampering };
  if (!tampering.rejected || grade.status === 'empty_patch') return graded;
  // graded 0: a proof in any mode (never an error: tampering is the agent's doing), a flag when rejecting
  const why = tampering.proven
    ? `tampered: ${(tampering.findings ?? [])
        .filter((f) => f.proof)
        .map(describeFinding)
        .join('; ')}`
    : `rejected (--reject-test-tampering): ${tampering.reason}`;
  return { ...graded, status: 'unresolved', resolved: false, reason: why };
}

async function gradeTests(
  runtime: Runtime,
  instance: SweInstance,
  patch: string,
  options: GradeOptions,
): Promise<{ grade: GradeResult; findings: Finding[] }> {
  const none = (grade: GradeResult) => ({ grade, findings: [] });
  const empty = patch.trim() === '';
  if (empty && !options.gradeEmpty) return none(result({ status: 'empty_patch', reason: 'empty patch' }));
  const spec = instance.eval_script ? null : specFor(instance);
  if (spec && 'error' in spec) return none(result({ status: 'error', reason: spec.error }));
  const parserName = parserFor(instance);
  if (typeof parserName !== 'string') return none(result({ status: 'error', reason: parserName.error }));
  if (!getLogParser(parserName))
    return none(result({ status: 'error', reason: `unknown log parser "${parserName}"` }));

  const t0 = performance.now();
  let env: InstanceEnv;
  try {
    env = await runtime.prepare(instance, 'grade');
  } catch (error) {
    const envLog = error instanceof EnvBuildError ? { env_log: error.log } : {};
    return none(
      result({ status: 'error', reason: `grading environment: ${(error as Error).message}`, ...envLog }),
    );
  }
  const durations: Durations = { setup: performance.now() - t0, apply: 0, install: 0, tests: 0, parse: 0 };
  const environment = env.environment?.cached.name ?? null;
  try {
    if (options.signal?.aborted) return none(cancelled(durations, environment));
    // the install of the unpatched tree, kept as the memo later samples replay (before the patch: no
    // code of the agent's has run in this environment yet); nothing where there is one
    await env.environment?.prime();
    const t1 = performance.now();
    const applied: ApplyResult = empty
      ? { applied: true, method: null, output: '' }
      : await applyPatch(env, patch);
    durations.apply = performance.now() - t1;
    if (!applied.applied) {
      return none(
        result({
          status: 'unresolved',
          reason: 'patch does not apply',
          durations_ms: durations,
          log: applied.output,
          environment,
        }),
      );
    }
    if (options.signal?.aborted) return none(cancelled(durations, environment));
    const installed = await installSample(runtime, instance, env, patch, durations);
    if (typeof installed !== 'string') return none(installed);
    const base = { apply_method: applied.method, durations_ms: durations, environment };
    const testCmd = (spec as Spec | null)?.testCmd ?? null;
    const ran = { instance, env, testCmd, installed, options, durations };
    if (spec && options.hardened !== false) return await hardenedTests(ran, spec as Spec, patch, base);
    const script = await evalScriptFor(instance, spec as Spec | null, env);
    if (options.signal?.aborted) return none(cancelled(durations, environment));
    const t2 = performance.now();
    const run = await env.exec(script, {
      timeoutMs: options.testTimeoutMs,
      ...(env.environment ? { env: env.environment.guardEnv() } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    durations.tests = performance.now() - t2;
    if (run.cancelled || options.signal?.aborted) return none(cancelled(durations, environment));
    if (run.exitCode === 97 && run.output.includes('test_patch failed to apply'))
      return none(
        result({ ...base, log: installed + run.output, status: 'error', reason: TEST_PATCH_ERROR }),
      );
    const t3 = performance.now();
    const graded = run.timedOut ? null : gradeLog(instance, run.output);
    durations.parse = performance.now() - t3;
    return none(await judged(ran, graded, { ...base, log: installed + run.output }));
  } catch (error) {
    return none(
      result({
        status: 'error',
        reason: `grading failed: ${(error as Error).message}`,
        durations_ms: durations,
        environment,
      }),
    );
  } finally {
    await env.dispose().catch(() => {});
  }
}

const TEST_PATCH_ERROR = 'test_patch does not apply (dataset or environment problem)';

interface Ran {
  instance: SweInstance;
  env: InstanceEnv;
  testCmd: string | null;
  /** the per-sample install's output (the log's head) */
  installed: string;
  options: GradeOptions;
  durations: Durations;
}

type Base = Pick<GradeResult, 'apply_method' | 'durations_ms' | 'environment'>;

/** The tests run through the integrity layers (src/rollout/integrity/grade-run.ts). */
async function hardenedTests(
  ran: Ran,
  spec: Spec,
  patch: string,
  base: Base,
): Promise<{ grade: GradeResult; findings: Finding[] }> {
  const { instance, env, options, durations } = ran;
  const rules = gradingRules(instance, { xfailFails: options.rejectTampering });
  const t2 = performance.now();
  const out = await runHardenedTests(env, instance, spec, patch, {
    timeoutMs: options.testTimeoutMs,
    version: rules.version,
    ...(env.environment ? { env: env.environment.guardEnv() } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  durations.tests = performance.now() - t2;
  const logged = { ...base, log: ran.installed + out.output };
  const none = (grade: GradeResult) => ({ grade, findings: [] });
  if (out.kind !== 'ran') {
    if (out.kind === 'cancelled') return none(cancelled(durations, base.environment));
    if (out.kind === 'test_patch')
      return none(result({ ...logged, status: 'error', reason: TEST_PATCH_ERROR }));
    if (out.kind === 'setup')
      return none(
        result({ ...logged, status: 'error', reason: 'grading failed: the test set-up script failed' }),
      );
    if (out.kind === 'timeout') return none(await judged(ran, null, logged));
    const finding: Finding = {
      layer: 'test-surface',
      reason: 'the patch leaves the test surface in a state polar could not restore from base_commit',
    };
    return {
      grade: result({ ...logged, status: 'unresolved', reason: finding.reason }),
      findings: [finding],
    };
  }
  const t3 = performance.now();
  const graded = gradeEvaluation(instance, out.evaluation, spec.parser, rules);
  durations.parse = performance.now() - t3;
  const grade = await judged(ran, graded, logged);
  return {
    grade: { ...grade, test_exit_code: out.record.exit_code, integrity: out.record },
    findings: out.findings,
  };
}

/** The result of a test run: the import guard, a timeout, then the graded log. */
async function judged(
  { instance, env, testCmd, options }: Ran,
  graded: LogGrade | { error: string } | null,
  base: Base & Pick<GradeResult, 'log'>,
): Promise<GradeResult> {
  // the guard first: a run that tested an installed copy has no score, whatever its log says
  if (env.environment) {
    const tests = graded && !('error' in graded) ? [...graded.tests.values()] : [];
    const passed = tests.some((t) => t === 'PASSED' || t === 'XFAIL');
    const violation = await env.environment.checkGuard({
      passed,
      testCmd: instance.eval_script ? null : testCmd,
    });
    if (violation) return result({ ...base, status: 'error', reason: `import guard: ${violation.message}` });
  }
  if (graded === null) {
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
