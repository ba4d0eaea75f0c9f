/**
 * Runs a hardened test run (harden.ts) in a prepared grading environment and judges it (verdict.ts):
 * what grade.ts turns into a sample's result. The record it returns (the runner, its real exit code, the
 * canaries and the report's text) is written beside the test log (`logs/<key>.integrity.json`), so
 * `polar eval --regrade` reads the same report again instead of the test output.
 */
import type { SweInstance } from '../dataset.ts';
import type { ExecResult } from '../exec.ts';
import { gradeEvaluation, gradingRules, type LogGrade, parserFor } from '../grade-log.ts';
import { getLogParser } from '../log-parsers/index.ts';
import type { ParserVersion } from '../log-parsers/types.ts';
import { evaluateLog, type LogEvaluation } from '../resolve.ts';
import type { InstanceEnv } from '../runtime/types.ts';
import type { TestSpec } from '../specs.ts';
import type { Canary } from './canary.ts';
import type { Finding } from './findings.ts';
import { environmentPlugins, hardenedRun, readReport } from './harden.ts';
import { type RunnerReport, readNodeReport, readPytestReport } from './reports.ts';
import { expectedFailures, judgeRun } from './verdict.ts';

/** What a hardened run leaves for a regrade (logs/<key>.integrity.json). */
export interface IntegrityRecord {
  v: 1;
  runner: 'pytest' | 'node-test' | 'stdout';
  /** the runner's exit status as polar's shell saw it */
  exit_code: number | null;
  canaries: Canary[];
  /** the structured report's text, or null */
  report: string | null;
}

export type HardenedOutcome =
  | { kind: 'test_patch' | 'restore' | 'setup' | 'cancelled' | 'timeout'; output: string }
  | {
      kind: 'ran';
      output: string;
      evaluation: LogEvaluation;
      findings: Finding[];
      record: IntegrityRecord;
    };

/** Judges a run from its record and test output (also what the regrade does with a saved record). */
export function judgeRecord(
  instance: SweInstance,
  record: IntegrityRecord,
  output: string,
  parserName: string,
  version: ParserVersion,
): { evaluation: LogEvaluation; findings: Finding[] } {
  const parser = getLogParser(parserName)!;
  const seen = evaluateLog(output, parser, version);
  const official = seen.tests;
  const read: RunnerReport | string | null =
    record.report === null
      ? null
      : record.runner === 'pytest'
        ? readPytestReport(record.report)
        : record.runner === 'node-test'
          ? readNodeReport(record.report)
          : null;
  const expected = [...instance.FAIL_TO_PASS, ...instance.PASS_TO_PASS];
  const verdict = judgeRun(
    {
      runner: record.runner,
      report: record.report,
      read,
      exitCode: record.exit_code,
      official,
      officialFound: { found: seen.found, reason: seen.reason },
      output,
      canaries: record.canaries,
      expected,
    },
    parser,
    version,
  );
  const report = read !== null && typeof read !== 'string' ? read : null;
  return {
    evaluation: verdict.evaluation,
    findings: [...verdict.findings, ...expectedFailures(expected, verdict.evaluation.tests, report)],
  };
}

/**
 * A saved hardened run graded again (polar eval --regrade): its record's report under this polar's
 * parser and rules, the log's test output only for what the output claimed.
 */
export function regradeRecord(
  instance: SweInstance,
  log: string,
  recordText: string,
): LogGrade | { error: string } {
  let record: IntegrityRecord;
  try {
    record = JSON.parse(recordText) as IntegrityRecord;
  } catch (error) {
    return { error: `the run's integrity record is not JSON (${(error as Error).message})` };
  }
  if (record?.v !== 1 || !Array.isArray(record.canaries))
    return { error: "the run's integrity record is not one polar wrote" };
  const parser = parserFor(instance);
  if (typeof parser !== 'string') return parser;
  if (!getLogParser(parser)) return { error: `unknown log parser "${parser}"` };
  const rules = gradingRules(instance);
  const judged = judgeRecord(instance, record, log, parser, rules.version);
  return gradeEvaluation(instance, judged.evaluation, parser, rules);
}

export async function runHardenedTests(
  env: InstanceEnv,
  instance: SweInstance,
  spec: TestSpec,
  patch: string,
  o: {
    timeoutMs: number;
    version: ParserVersion;
    /** variables of the test run (the import guard's) */
    env?: Record<string, string>;
    signal?: AbortSignal;
  },
): Promise<HardenedOutcome> {
  const testPatchFile = `${env.scratch}/polar-test.diff`;
  await env.writeFile(
    testPatchFile,
    instance.test_patch.endsWith('\n') ? instance.test_patch : `${instance.test_patch}\n`,
  );
  const plan = hardenedRun(env, instance, spec, {
    agentPatch: patch,
    testPatchFile,
    setup: env.envSetup?.(spec.setup) ?? [],
    plugins: environmentPlugins(env.environment?.cached.sitePackages),
  });
  const signal = o.signal ? { signal: o.signal } : {};
  const prepared = await env.exec(plan.prepare, { timeoutMs: o.timeoutMs, ...signal });
  if (prepared.cancelled || o.signal?.aborted) return { kind: 'cancelled', output: prepared.output };
  if (prepared.timedOut) return { kind: 'timeout', output: prepared.output };
  if (prepared.exitCode === 97) return { kind: 'test_patch', output: prepared.output };
  if (prepared.exitCode === 98) return { kind: 'restore', output: prepared.output };
  if (prepared.exitCode !== 0) return { kind: 'setup', output: prepared.output };
  const run: ExecResult = await env.exec(plan.test, {
    timeoutMs: o.timeoutMs,
    ...(o.env ? { env: o.env } : {}),
    ...signal,
  });
  const output = `${prepared.output}${run.output}\n>>>>> Test Exit Code (polar): ${run.exitCode}\n`;
  if (run.cancelled || o.signal?.aborted) return { kind: 'cancelled', output };
  if (run.timedOut) return { kind: 'timeout', output };
  const record: IntegrityRecord = {
    v: 1,
    runner: plan.runner,
    exit_code: run.exitCode,
    canaries: plan.canaries,
    report: await readReport(env, plan.reportPath),
  };
  const judged = judgeRecord(instance, record, run.output, spec.parser, o.version);
  return { kind: 'ran', output, ...judged, record };
}
