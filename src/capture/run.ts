/**
 * `polar capture`: start the proxy, point the harness at it through its profile, run it with stdio passed
 * through, forward signals, record every call, and exit with the harness's exit code.
 */
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { createBackend } from '../backends/index.ts';
import type { Backend, BackendOptions } from '../backends/types.ts';
import { ensureBackendReady } from '../backends/wait.ts';
import { EnvironmentError, EXIT, errorMessage } from '../errors.ts';
import { harnessEnv } from '../harnesses/env.ts';
import { type HarnessName, resolveHarness } from '../harnesses/index.ts';
import { harnessSearchPath, resolveCommand, runHarnessProcess } from '../harnesses/process.ts';
import { makeRunDir } from '../harnesses/rundir.ts';
import { ProxyServer } from '../proxy/server.ts';
import { signalExitCode } from '../util/interrupt.ts';
import { log } from '../util/log.ts';
import type { CallRecord, SessionEndRecord } from './record.ts';
import { openSession } from './session.ts';

export interface CaptureRunOptions {
  command: string[];
  harness?: HarnessName;
  /** profile options, e.g. { api: 'openai-responses' } for Pi */
  harnessOptions?: Record<string, string>;
  backend: BackendOptions;
  /** an already created backend (polar eval reuses one across samples) */
  backendInstance?: Backend;
  model: string;
  output: string;
  /** capture format version (default 2) */
  format?: 1 | 2;
  cwd?: string;
  /** variables set for this run (on top of the allow-list of harnesses/env.ts) */
  env?: Record<string, string>;
  /** names of more variables of polar's environment the harness may see (`--pass-env`) */
  passEnv?: string[];
  taskId?: string;
  sample?: number;
  meta?: Record<string, string>;
  timeoutMs?: number;
  stdio?: 'inherit' | 'pipe' | 'ignore';
  /** stdin for the harness (default: inherited; 'ignore' gives it /dev/null) */
  stdin?: 'inherit' | 'ignore';
  quiet?: boolean;
  host?: string;
  port?: number;
  maxBodyBytes?: number;
  keepRunDir?: boolean;
  /** where the private harness config dir is made (default: the OS temp dir); a container mounts it */
  runDirBase?: string;
  /**
   * How the harness is started once the proxy listens (polar eval: inside a sandbox or container, which
   * reaches the proxy at the same URL): the command, host cwd and environment to spawn, and what to
   * close after. Default: the command as prepared, here.
   */
  launch?: (request: HarnessLaunchInput) => Promise<{
    command: string[];
    cwd: string;
    env: Record<string, string>;
    close(): Promise<void>;
    /** what ends the harness where it runs should polar die (HarnessLaunch.orphaned) */
    orphaned?: string[];
  }>;
  onCall?: (record: CallRecord) => void;
  /** ends the harness (its process group) as a forwarded interrupt does: the session ends `interrupted` */
  signal?: AbortSignal;
}

/** What a `launch` hook gets: the prepared harness, its environment, the proxy and its config dir. */
export interface HarnessLaunchInput {
  argv: string[];
  env: Record<string, string>;
  proxyUrl: string;
  runDir: string;
}

export interface CaptureRunResult {
  sessionId: string;
  exitCode: number | null;
  signal: string | null;
  status: SessionEndRecord['status'];
  /** call records written; of them, failed calls, calls the harness hung up on, calls cut at the end */
  calls: number;
  errors: number;
  clientClosed: number;
  cut: number;
  /** calls whose record could not be written */
  lost: number;
  /** calls a weight update cut mid-answer (CallCounters.weightUpdateCut); absent: none */
  weightUpdateCut?: number;
  output: string;
  stdout?: string;
  stderr?: string;
}

export async function runCapture(options: CaptureRunOptions): Promise<CaptureRunResult> {
  if (options.command.length === 0)
    throw new EnvironmentError(
      'no harness command given',
      'usage: polar capture [options] -- <command> [args...]',
    );
  const profile = resolveHarness(options.harness, options.command);
  // a harness that cannot start leaves no session (and no capture file) behind; a launched one (a
  // sandbox) resolves its command where it runs
  if (!options.launch) checkHarnessCommand(options.command, profile.name, options.cwd, options.env?.PATH);
  const output = resolve(options.output);
  // the server's set-up checked once before any harness time is spent (an injected backend was checked
  // by its owner: polar eval probes once per run)
  if (!options.backendInstance) await ensureBackendReady(options.backend);
  const backend = options.backendInstance ?? (await createBackend(options.backend));
  const ownsBackend = !options.backendInstance;
  const proxy = new ProxyServer({
    host: options.host,
    port: options.port,
    maxBodyBytes: options.maxBodyBytes,
  });
  const runDir = await makeRunDir(options.runDirBase ?? tmpdir());
  const cwd = resolve(options.cwd ?? process.cwd());
  let exitCode: number | null = null;
  let signal: string | null = null;
  let status: SessionEndRecord['status'] = 'error';
  let stdout: string | undefined;
  let stderr: string | undefined;
  const { url } = await proxy.listen();
  const capture = openSession({
    profile,
    backend,
    model: options.model,
    output,
    ...(options.format ? { format: options.format } : {}),
    argv: options.command,
    cwd,
    proxyUrl: url,
    ...(options.taskId !== undefined ? { taskId: options.taskId } : {}),
    ...(options.sample !== undefined ? { sample: options.sample } : {}),
    ...(options.meta ? { meta: options.meta } : {}),
    ...(options.onCall ? { onCall: options.onCall } : {}),
  });
  const session = capture.proxy;
  let closeLaunch: (() => Promise<void>) | null = null;
  try {
    proxy.addSession(session);
    const prepared = await profile.prepare({
      proxyUrl: url,
      key: session.key,
      model: options.model,
      runDir,
      argv: options.command,
      options: options.harnessOptions ?? {},
    });
    capture.begin(prepared.argv);
    log.debug(`capture: proxy ${url}, session ${session.id}, harness ${profile.name}, run dir ${runDir}`);
    // an allow-list, never all of process.env: no backend or vendor key reaches the harness
    const env = harnessEnv(process.env, {
      passEnv: options.passEnv ?? [],
      // PWD is the dir the harness runs in, not polar's (OpenCode works in $PWD before its cwd)
      extra: { ...options.env, PWD: cwd },
      profile: prepared.env,
    });
    const launched = options.launch
      ? await options.launch({ argv: prepared.argv, env, proxyUrl: url, runDir })
      : null;
    closeLaunch = launched ? () => launched.close() : null;
    const stdio = options.stdio ?? 'inherit';
    const { result, interrupted } = await startHarness(
      launched ?? { command: prepared.argv, cwd: options.cwd, env },
      options,
      runDir,
      profile.name,
    );
    exitCode = result.exitCode ?? null;
    signal = result.signal ?? null;
    status = result.timedOut
      ? 'timeout'
      : interrupted
        ? 'interrupted'
        : exitCode === 0
          ? 'completed'
          : 'error';
    if (stdio === 'pipe') {
      stdout = String(result.stdout ?? '');
      stderr = String(result.stderr ?? '');
    }
  } finally {
    await closeLaunch?.().catch(() => {});
    await proxy.close(2000);
    proxy.removeSession(session.key);
    try {
      const unfinished = proxy.activeCalls(session.key);
      capture.end({ exitCode, signal, status, unauthorized: proxy.unauthorized, unfinished });
    } finally {
      if (ownsBackend) await backend.close();
      if (!options.keepRunDir) await rm(runDir, { recursive: true, force: true });
    }
  }
  // a capture write that failed (disk full, file-size limit) fails the run, with the file still valid
  if (capture.writeError) throw capture.writeError;
  return {
    sessionId: session.id,
    exitCode,
    signal,
    status,
    calls: capture.calls,
    errors: capture.errors,
    clientClosed: capture.counters.clientClosed,
    cut: capture.counters.cut,
    lost: capture.counters.lost,
    ...(capture.counters.weightUpdateCut > 0 ? { weightUpdateCut: capture.counters.weightUpdateCut } : {}),
    output,
    ...(stdout !== undefined ? { stdout } : {}),
    ...(stderr !== undefined ? { stderr } : {}),
  };
}

/**
 * The harness command must resolve as it will be started (PATH, then ./node_modules/.bin): checked before
 * any session is opened or "capturing" is said. Harnesses are the user's own installs (README, "Install").
 */
export function checkHarnessCommand(command: string[], harness: string, cwd?: string, path?: string): void {
  const [file] = command;
  if (file !== undefined && !resolveCommand(file, harnessSearchPath(path), cwd ? resolve(cwd) : undefined))
    throw harnessNotFound(file, harness);
}

function harnessNotFound(file: string, harness: string): EnvironmentError {
  return new EnvironmentError(
    `could not start the harness \`${file}\`: command not found`,
    `install it (for example \`npm i -g ${installHint(harness)}\`) so that it is on PATH, or give its path`,
  );
}

/** Spawns the harness (as launched, or as prepared) and says when it could not start at all. */
async function startHarness(
  launch: {
    command: string[];
    cwd?: string | undefined;
    env: Record<string, string>;
    orphaned?: string[] | undefined;
  },
  options: CaptureRunOptions,
  runDir: string,
  profileName: string,
) {
  const [file, ...args] = launch.command as [string, ...string[]];
  const stdio = options.stdio ?? 'inherit';
  const run = await runHarnessProcess(file, args, {
    ...(launch.cwd ? { cwd: launch.cwd } : {}),
    env: launch.env,
    stdio,
    stdin: options.stdin === 'ignore' ? 'ignore' : stdio === 'inherit' ? 'inherit' : 'ignore',
    ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    runDir: options.keepRunDir ? null : runDir,
    ...(launch.orphaned?.length ? { orphaned: launch.orphaned } : {}),
  });
  const { result } = run;
  if (result.failed && result.exitCode === undefined && !result.signal && !result.timedOut) {
    const code = (result.cause as NodeJS.ErrnoException | undefined)?.code;
    throw code === 'ENOENT'
      ? harnessNotFound(file, profileName)
      : new EnvironmentError(`could not start the harness \`${file}\`: ${errorMessage(result.cause)}`);
  }
  return run;
}

function installHint(harness: string): string {
  switch (harness) {
    case 'codex':
      return '@openai/codex';
    case 'claude':
      return '@anthropic-ai/claude-code';
    case 'pi':
      return '@mariozechner/pi-coding-agent';
    case 'qwen':
      return '@qwen-code/qwen-code';
    case 'gemini':
      return '@google/gemini-cli';
    case 'opencode':
      return 'opencode-ai';
    default:
      return '<the agent package>';
  }
}

/** The exit code polar itself exits with: the harness's, or 128 + signal number like a shell. */
export function exitCodeOf(result: CaptureRunResult): number {
  if (result.exitCode !== null) return result.exitCode;
  if (result.signal) return signalExitCode(result.signal as NodeJS.Signals);
  return EXIT.failure;
}
