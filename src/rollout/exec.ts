/**
 * Runs a command as the leader of its own process group, so a timeout kills the whole tree (a test
 * runner and the workers it forked, a harness and its tool subprocesses), not only the direct child.
 * The live groups are killed when polar exits, and by the reaper (reaper.mjs) when polar dies without
 * exiting (SIGKILL, an OOM kill): a hanging test run no longer outlives it. The reaper removes the
 * temporary folders polar names to it (reapDirOnDeath) too.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';

export interface ExecOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  /** written to stdin, which is then closed; stdin is ignored otherwise */
  input?: string;
  /** kill the process tree after this many ms (SIGTERM, then SIGKILL after `graceMs`) */
  timeoutMs?: number;
  graceMs?: number;
  /** replace the environment instead of extending process.env */
  extendEnv?: boolean;
  /** ends the process tree as a timeout does (SIGTERM, then SIGKILL after `graceMs`); `cancelled` says so */
  signal?: AbortSignal;
}

export interface ExecResult {
  exitCode: number | null;
  signal: string | null;
  /** stdout and stderr interleaved */
  output: string;
  /** each on its own (a command whose answer is its stdout) */
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** ended by `signal` (a cancelled sample, an interrupt) */
  cancelled?: boolean;
  durationMs: number;
  /** set when the command could not be started at all (ENOENT, EACCES) */
  spawnError?: string;
}

const liveGroups = new Set<number>();

const REAPER = fileURLToPath(new URL('./reaper.mjs', import.meta.url));
let reaper: { child: ChildProcess; stdin: Writable } | null = null;

/** The reaper, started before the first group (in a group of its own, never holding polar open). */
function startReaper(): void {
  if (!reaper) {
    const child = spawn(process.execPath, [REAPER], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
    child.on('error', () => {});
    child.unref();
    const stdin = child.stdin as Writable;
    stdin.on('error', () => {});
    (stdin as Writable & { unref?: () => void }).unref?.();
    reaper = { child, stdin };
  }
}

function tellReaper(line: string): void {
  reaper?.stdin.write(`${line}\n`);
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // the group is already gone
  }
}

/**
 * The reaper removes `dir` (a temporary folder polar made) if polar ends without removing it: killed
 * outright (SIGKILL, OOM) or exiting before it got there. `forgetDir` once polar removed it itself.
 */
export function reapDirOnDeath(dir: string): void {
  if (dir.includes('\n')) return;
  startReaper();
  tellReaper(`d+${dir}`);
}

export function forgetDir(dir: string): void {
  if (!dir.includes('\n')) tellReaper(`d-${dir}`);
}

/** Kills every process tree started through execTree that is still running (used on SIGINT). */
export function killAllTrees(signal: NodeJS.Signals = 'SIGKILL'): void {
  for (const pid of liveGroups) killGroup(pid, signal);
}

process.once('exit', () => {
  killAllTrees('SIGKILL');
  reaper?.stdin.end('done\n');
});

export async function execTree(
  file: string,
  args: readonly string[],
  options: ExecOptions = {},
): Promise<ExecResult> {
  const started = performance.now();
  const env: Record<string, string | undefined> = {
    ...(options.extendEnv === false ? {} : process.env),
    ...options.env,
  };
  // a test runner polar itself runs under must not leak into the commands it runs (node --test would
  // think it is nested and run nothing)
  delete env.NODE_TEST_CONTEXT;
  // before the command: started after it, a polar killed in between left the group unknown to the reaper
  startReaper();
  const child = execa(file, args, {
    cwd: options.cwd,
    env,
    extendEnv: false,
    detached: true,
    cleanup: true,
    reject: false,
    all: true,
    stripFinalNewline: false,
    stdin: options.input === undefined ? 'ignore' : 'pipe',
    input: options.input,
    killSignal: 'SIGTERM',
    forceKillAfterDelay: options.graceMs ?? 2000,
    maxBuffer: 256 * 1024 * 1024,
  });
  const pid = child.pid;
  if (pid !== undefined) {
    liveGroups.add(pid);
    tellReaper(`+${pid}`);
  }
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  let forceTimer: NodeJS.Timeout | undefined;
  const end = () => {
    if (pid === undefined || forceTimer) return;
    killGroup(pid, 'SIGTERM');
    forceTimer = setTimeout(() => killGroup(pid, 'SIGKILL'), options.graceMs ?? 2000);
    forceTimer.unref();
  };
  if (options.timeoutMs !== undefined && options.timeoutMs > 0 && pid !== undefined) {
    timer = setTimeout(() => {
      timedOut = true;
      end();
    }, options.timeoutMs);
  }
  let cancelled = false;
  const onAbort = () => {
    cancelled = true;
    end();
  };
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  const result = await child;
  options.signal?.removeEventListener('abort', onAbort);
  if (timer) clearTimeout(timer);
  if (forceTimer) clearTimeout(forceTimer);
  if (pid !== undefined) {
    // the leader exited; make sure nothing it left behind in its group survives
    killGroup(pid, 'SIGKILL');
    liveGroups.delete(pid);
    tellReaper(`-${pid}`);
  }
  const spawnFailed = result.failed && result.exitCode === undefined && result.signal === undefined;
  return {
    exitCode: result.exitCode ?? null,
    signal: result.signal ?? null,
    output: typeof result.all === 'string' ? result.all : '',
    stdout: typeof result.stdout === 'string' ? result.stdout : '',
    stderr: typeof result.stderr === 'string' ? result.stderr : '',
    timedOut,
    ...(cancelled ? { cancelled } : {}),
    durationMs: performance.now() - started,
    ...(spawnFailed ? { spawnError: result.shortMessage ?? 'could not start' } : {}),
  };
}

/**
 * A git environment independent of the user's config (no global excludes or hooks, fixed identity).
 * `globalConfig` must be a regular file polar owns: `git config --global` run by anything under this
 * environment writes to it by replacing it, which must never be /dev/null.
 */
export function gitEnv(globalConfig: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    GIT_CONFIG_GLOBAL: globalConfig,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_AUTHOR_NAME: 'polar',
    GIT_AUTHOR_EMAIL: 'polar@localhost',
    GIT_COMMITTER_NAME: 'polar',
    GIT_COMMITTER_EMAIL: 'polar@localhost',
    ...extra,
  };
}
