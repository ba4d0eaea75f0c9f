/** What a fake command runner answers in the runtime tests (src/rollout/exec.ts's ExecResult): a command that ran. */
import type { ExecResult } from '../../src/rollout/exec.ts';

/** Exit 0 with `stdout` as its output, unless `over` says otherwise. */
export function execResult(over: Partial<ExecResult> & { stdout?: string } = {}): ExecResult {
  const stdout = over.stdout ?? '';
  const stderr = over.stderr ?? '';
  return {
    exitCode: 0,
    signal: null,
    output: stdout + stderr,
    stdout,
    stderr,
    timedOut: false,
    durationMs: 1,
    ...over,
  };
}
