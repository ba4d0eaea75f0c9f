/**
 * A test log parser: the text between the test markers in, test id -> status out. Statuses are the
 * first word of the line that named the test, as the official parsers keep it (swebench
 * harness/log_parsers/python.py stores `test_case[0]` unchecked), so a map can hold a value outside
 * TEST_STATUSES; grading treats such a value as neither passed nor failed, as the official grading does.
 */
export type TestStatus = 'PASSED' | 'FAILED' | 'SKIPPED' | 'ERROR' | 'XFAIL';

/** In the order of swebench's `TestStatus` enum (harness/constants/__init__.py, v4.1.0 and v5.0.1). */
export const TEST_STATUSES: readonly TestStatus[] = ['FAILED', 'PASSED', 'SKIPPED', 'ERROR', 'XFAIL'];

export type StatusMap = Map<string, string>;

/**
 * Which official harness's parser rules apply: '4.1' (tag v4.1.0; SWE-bench Verified rows without an
 * eval_script) or '5' (swebench 5.x, v5.0.1; rows that carry their own eval_script and log_parser).
 */
export const PARSER_VERSIONS = ['4.1', '5'] as const;
export type ParserVersion = (typeof PARSER_VERSIONS)[number];

/** How a log is graded: the official rules exactly, or with the guards polar eval adds (src/rollout/grade.ts). */
export const SEMANTICS = ['official', 'polar'] as const;
export type Semantics = (typeof SEMANTICS)[number];

export type LogParser = (log: string, version?: ParserVersion) => StatusMap;

/** Strips ANSI colour and cursor sequences (for polar's own parsers; the official ones keep them). */
export function stripAnsi(text: string): string {
  return text.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, '');
}

export function lines(log: string): string[] {
  return stripAnsi(log).replace(/\r\n?/g, '\n').split('\n');
}
