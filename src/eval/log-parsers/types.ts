/** A test log parser: the text between the test markers in, test id -> status out. */
export type TestStatus = 'PASSED' | 'FAILED' | 'SKIPPED' | 'ERROR' | 'XFAIL';

export const TEST_STATUSES: readonly TestStatus[] = ['PASSED', 'FAILED', 'SKIPPED', 'ERROR', 'XFAIL'];

export type StatusMap = Map<string, TestStatus>;

export type LogParser = (log: string) => StatusMap;

/** Strips ANSI colour and cursor sequences (pytest and tox colour their output on some images). */
export function stripAnsi(text: string): string {
  return text.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, '');
}

export function lines(log: string): string[] {
  return stripAnsi(log).replace(/\r\n?/g, '\n').split('\n');
}
