/**
 * The verifier grader (`polar eval --grader 'CMD'`, or a row's `grader` field): a command that reads the
 * rollout as one JSON object on stdin and prints a reward in [0, 1] on its last stdout line. It is how
 * tasks that are not SWE-bench get a reward. A command that cannot run, exits non-zero, times out or
 * prints anything but a number in [0, 1] is an infrastructure failure (src/rollout/outcome.ts): the sample
 * is an `error` with no reward, never a 0 that GRPO would train on.
 */
import { readCapture } from '../capture/reader.ts';
import { UsageError } from '../errors.ts';
import type { Grader } from '../options/defaults.ts';
import { execTree } from './exec.ts';

/** What the verifier reads on stdin. */
export interface VerifierInput {
  /** the dataset row as given */
  row: Record<string, unknown>;
  sample: number;
  /** the content of the last model answer the capture recorded (null when there was none) */
  final_message: string | null;
  /** the diff of the agent's edits against the row's base commit ('' when none) */
  patch: string;
  /** the capture file of the run (null when none was written) */
  capture: string | null;
}

export type VerifierResult = { reward: number; output: string } | { error: string; output: string };

/** What grades a run: --grader's value (declared with the flags' defaults, src/options/defaults.ts). */
export type { Grader };

/**
 * The verifier of a command that grades each rollout as it finishes (loop, gym): polar's own grader
 * (undefined; also under the judge, which src/rollout/judge/finish.ts runs) or a verifier command. swebench
 * grades a finished run, so it is refused, saying `why`.
 */
export function rolloutVerifier(grader: Grader, why: string): string | undefined {
  if (grader.kind === 'swebench')
    throw new UsageError(`--grader swebench: ${why}; use polar, judge or a verifier command`);
  return grader.kind === 'verifier' ? grader.command : undefined;
}

/** The content of the last call with a model answer in a capture file (null when none). */
export async function finalMessage(capture: string | null): Promise<string | null> {
  if (!capture) return null;
  let last: string | null = null;
  for await (const { record } of readCapture(capture, { skipInvalid: true, onInvalid: () => {} })) {
    if (record.type !== 'call') continue;
    const answer = record.canonical_response as { content?: unknown } | null | undefined;
    if (answer && typeof answer.content === 'string' && answer.content !== '') last = answer.content;
  }
  return last;
}

/** Parses the verifier's stdout: its last non-empty line must be a number in [0, 1]. */
export function parseReward(stdout: string): number | string {
  const lines = stdout.split('\n').map((l) => l.trim());
  const last = lines.filter((l) => l !== '').at(-1);
  if (last === undefined) return 'printed nothing (it must print a reward in [0, 1] on its last line)';
  const value = /^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/.test(last) ? Number(last) : Number.NaN;
  if (!Number.isFinite(value)) return `printed ${JSON.stringify(last.slice(0, 80))}, not a number in [0, 1]`;
  if (value < 0 || value > 1) return `printed ${last}, outside [0, 1]`;
  return value;
}

/**
 * Runs `command` through the shell with `input` as JSON on stdin, as the leader of its own process group
 * (src/rollout/exec.ts): a timeout or a cancel ends the whole tree (the test runner the shell started and
 * its workers), not only the shell.
 */
export async function runVerifier(
  command: string,
  input: VerifierInput,
  options: { timeoutMs: number; cwd?: string; signal?: AbortSignal },
): Promise<VerifierResult> {
  const r = await execTree('/bin/sh', ['-c', command], {
    input: JSON.stringify(input),
    timeoutMs: options.timeoutMs,
    ...(options.cwd ? { cwd: options.cwd } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const { output } = r;
  const named = `verifier grader \`${command}\``;
  if (r.timedOut)
    return { error: `${named} timed out after ${options.timeoutMs} ms (--test-timeout)`, output };
  if (r.cancelled) return { error: `${named} was stopped: the sample was cancelled`, output };
  if (r.spawnError !== undefined) return { error: `${named} could not run: ${r.spawnError}`, output };
  if (r.exitCode !== 0) {
    const why = r.exitCode !== null ? `exited ${r.exitCode}` : `was killed by ${r.signal ?? 'a signal'}`;
    const tail = r.stderr.trim().split('\n').slice(-3).join(' | ');
    return { error: `${named} ${why}${tail ? `: ${tail}` : ''}`, output };
  }
  const reward = parseReward(r.stdout);
  if (typeof reward === 'string') return { error: `${named} ${reward}`, output };
  return { reward, output };
}
