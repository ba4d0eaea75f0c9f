/** The body of `polar capture`: typed flags in, runCapture, exit code out. */
import ora, { type Ora } from 'ora';
import { UsageError } from '../errors.ts';
import { resolveHarness } from '../harnesses/index.ts';
import { backendOptions } from '../options/backend.ts';
import { checkOutputFile } from '../options/output.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import { type CaptureFlags, defaultOutput } from './options.ts';
import { type CaptureRunResult, checkHarnessCommand, exitCodeOf, runCapture } from './run.ts';

export async function captureCommand(command: string[], f: CaptureFlags): Promise<number> {
  log.configure({ quiet: Boolean(f.quiet) });
  // every flag and the output path are checked before anything starts or is printed
  if (command.length === 0)
    throw new UsageError('no harness command given', 'usage: polar capture [options] -- <command> [args...]');
  const backend = backendOptions(f);
  const profile = resolveHarness(f.harness, command);
  if (f.piApi && profile.name !== 'pi')
    throw new UsageError(
      `--pi-api is for the pi harness, and this command runs ${profile.name}`,
      'drop --pi-api',
    );
  const output = f.output ?? defaultOutput(profile.name);
  await checkOutputFile(output, f.output ? '--output' : 'the default output');
  checkHarnessCommand(command, profile.name);
  let spinner: Ora | undefined;
  let calls = 0;
  let tokens = 0;
  // the status line lives on a terminal stderr, and only while the harness's stdout is not that terminal
  // too (an interactive harness draws there; `polar capture -- codex exec --json | jq` gets the line)
  if (process.stderr.isTTY && !process.stdout.isTTY && !f.quiet && !process.env.CI) {
    spinner = ora({
      text: `polar: capturing ${profile.name} → ${backend.kind} (${backend.model}) into ${output}`,
      stream: process.stderr,
      discardStdin: false,
    });
  } else {
    log.info(`capturing ${profile.name} through ${backend.kind} (${backend.model}) into ${output}`);
  }
  const result = await runCapture({
    command,
    harness: profile.name,
    harnessOptions: {
      ...(f.piApi ? { api: f.piApi } : {}),
      ...(f.harnessNode ? { node: f.harnessNode } : {}),
    },
    passEnv: f.passEnv ?? [],
    backend,
    model: backend.model,
    output,
    ...(f.format ? { format: f.format } : {}),
    ...(f.taskId ? { taskId: f.taskId } : {}),
    ...(f.sample !== undefined ? { sample: f.sample } : {}),
    meta: f.meta ?? {},
    ...(f.timeout ? { timeoutMs: f.timeout } : {}),
    host: f.host,
    ...(f.port !== undefined ? { port: f.port } : {}),
    maxBodyBytes: f.maxBody,
    keepRunDir: Boolean(f.keepRunDir),
    onCall: (record) => {
      calls++;
      tokens += record.completion_token_ids?.length ?? 0;
      if (spinner)
        spinner.text = `polar: ${plural(calls, 'call')}, ${plural(tokens, 'sampled token')} → ${output}`;
      if (record.error) log.debug(`call ${record.seq} failed: ${record.error.message}`);
    },
  }).finally(() => spinner?.stop());
  const apart = [
    result.clientClosed ? `${result.clientClosed} hung up by the harness` : '',
    result.cut ? `${result.cut} cut at the end` : '',
  ].filter(Boolean);
  const summary = `${plural(result.calls, 'call')} (${[`${result.errors} failed`, ...apart].join(', ')}) recorded in ${result.output}; harness ${result.status}${
    result.exitCode !== null
      ? ` with exit code ${result.exitCode}`
      : result.signal
        ? ` by ${result.signal}`
        : ''
  }`;
  if (result.errors > 0) log.warn(summary);
  else log.info(summary);
  if (f.json) process.stdout.write(`${JSON.stringify(captureSummary(result))}\n`);
  return exitCodeOf(result);
}

/**
 * `polar capture --json`'s one line, after the harness's own output: the capture file, its session, the
 * calls recorded (failed, hung up by the harness, cut at the end, lost: not written) and how the harness
 * ended (its status, exit code or signal), in the names of the capture format (docs/capture-format.md).
 */
export function captureSummary(result: CaptureRunResult): Record<string, unknown> {
  return {
    output: result.output,
    session_id: result.sessionId,
    calls: result.calls,
    errors: result.errors,
    client_closed: result.clientClosed,
    cut: result.cut,
    lost: result.lost,
    harness: { status: result.status, exit_code: result.exitCode, signal: result.signal },
  };
}
