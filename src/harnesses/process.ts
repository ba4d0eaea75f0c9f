/**
 * Runs one harness process for `polar capture`: its own process group (so polar can end everything it
 * started) unless it reads polar's terminal, a watchdog that ends it if polar dies (rundir.ts), polar's
 * SIGINT / SIGTERM / SIGHUP forwarded to the whole group, and a timeout and an abort signal (polar loop
 * cancelling one group's samples) that end this harness alone: its group, and what it started in other
 * groups (a detached tool, as Pi runs its bash tool), walked by parent pid. A forwarded signal reaches the
 * group only (a tree walked then could hold reused pids by the time an interactive harness exits). A
 * harness that runs elsewhere through a client here (`docker exec`) outlives its client: whoever launched
 * it removes its container after it ends, and the watchdog does (`orphaned`) if polar dies first.
 */
import { spawnSync } from 'node:child_process';
import { realpathSync, statSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { execa, type Result } from 'execa';
import { log } from '../util/log.ts';
import { startWatchdog } from './rundir.ts';

const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Where a command word resolves as the harness is started (execa with preferLocal): a path as given
 * (relative to `cwd`), else the first hit on `searchPath`; null when nothing is there.
 */
export function resolveCommand(word: string, searchPath: string, cwd = process.cwd()): string | null {
  const isFile = (p: string) => {
    try {
      return statSync(p).isFile();
    } catch {
      return false;
    }
  };
  if (word.includes('/')) {
    const path = resolve(cwd, word);
    return isFile(path) ? realpathSync(path) : null;
  }
  for (const dir of searchPath.split(delimiter).filter(Boolean)) {
    const candidate = join(dir, word);
    if (isFile(candidate)) return realpathSync(candidate);
  }
  return null;
}

/**
 * The harness's search path as execa's preferLocal builds it (npm-run-path, execa 9.6.0): the
 * node_modules/.bin of polar's working directory and of each parent, the running node's directory, then
 * `path` (the harness's PATH).
 */
export function harnessSearchPath(path = process.env.PATH ?? ''): string {
  const local: string[] = [];
  for (let dir = process.cwd(); ; dir = dirname(dir)) {
    local.push(join(dir, 'node_modules', '.bin'));
    if (dirname(dir) === dir) break;
  }
  return [...local, dirname(process.execPath), path].join(delimiter);
}

/**
 * `roots` and their descendants now, by parent pid (`ps`, as the watchdog walks them): a tool the harness
 * started in a session of its own (Pi's bash tool: `detached`) is outside the harness's process group but
 * keeps its parent link while the harness lives.
 */
export function processTree(roots: number[]): number[] {
  const ps = spawnSync('ps', ['-A', '-o', 'pid=,ppid='], { encoding: 'utf8' });
  const children = new Map<number, number[]>();
  for (const line of (ps.stdout ?? '').split('\n')) {
    const [pid, ppid] = line.trim().split(/\s+/).map(Number);
    if (!pid || ppid === undefined) continue;
    children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  }
  const out = [...roots];
  for (let i = 0; i < out.length; i++)
    for (const c of children.get(out[i]!) ?? []) if (!out.includes(c)) out.push(c);
  return out;
}

export interface HarnessProcessOptions {
  cwd?: string;
  env: Record<string, string>;
  stdio: 'inherit' | 'pipe' | 'ignore';
  stdin: 'inherit' | 'ignore';
  timeoutMs?: number;
  /** removed by the watchdog if polar dies (null: keep it) */
  runDir: string | null;
  /**
   * ends this harness alone: SIGTERM to its group and its descendants in other groups (SIGKILL 5 s later,
   * or once it has ended), the result `interrupted`
   */
  signal?: AbortSignal;
  /** run by the watchdog if polar dies while the harness runs, after it ended the group (a container's `rm -f`) */
  orphaned?: string[];
}

export interface HarnessProcessResult {
  result: Result;
  /** a forwarded signal ended it */
  interrupted: boolean;
}

export async function runHarnessProcess(
  file: string,
  args: string[],
  options: HarnessProcessOptions,
): Promise<HarnessProcessResult> {
  // a process outside the terminal's foreground group is stopped when it reads the terminal
  const group = !(options.stdin === 'inherit' && process.stdin.isTTY);
  // the handlers first: a Ctrl-C that comes once the harness runs (even before the watchdog below is
  // forked, which takes a while on a loaded machine) is forwarded, never node's default exit by signal;
  // node runs them from the event loop, so `child` is set by the time one runs
  let child: ReturnType<typeof execa> | undefined;
  const signalHarness = (name: NodeJS.Signals) => {
    const pid = child?.pid;
    if (group && pid !== undefined) {
      try {
        process.kill(-pid, name);
        return;
      } catch {}
    }
    child?.kill(name);
  };
  let interrupted = false;
  const handlers = new Map<string, () => void>();
  for (const name of FORWARDED) {
    const handler = () => {
      interrupted = true;
      log.debug(`capture: forwarding ${name} to the harness`);
      signalHarness(name);
    };
    handlers.set(name, handler);
    process.on(name, handler);
  }
  // an abort (`signal`): the harness's group is ended by its pid, as a forwarded signal ends it, and so
  // are its descendants in other groups (walked before the harness dies and they lose their parent)
  let forceKill: NodeJS.Timeout | undefined;
  let abortTree: number[] | null = null;
  const signalTree = (pids: number[], name: NodeJS.Signals) => {
    signalHarness(name);
    for (const pid of pids.slice(1))
      try {
        process.kill(pid, name);
      } catch {}
  };
  const endTree = () => {
    const pid = child?.pid;
    const tree = pid === undefined ? [] : processTree([pid]);
    abortTree = [...new Set([...(abortTree ?? []), ...tree])];
    signalTree(tree, 'SIGTERM');
    // what the tree started since, too (a descendant's own children keep their parent link)
    forceKill ??= setTimeout(() => signalTree(processTree(abortTree ?? []), 'SIGKILL'), 5000);
    forceKill.unref();
  };
  const onAbort = () => {
    interrupted = true;
    log.debug('capture: the run was cancelled, ending the harness');
    endTree();
  };
  // the timeout ends the tree as a cancel does (execa's own timeout signalled the harness alone: a tool
  // it detached ran on); the result says `timedOut` as execa's did
  let timedOut = false;
  const timeout = options.timeoutMs
    ? setTimeout(() => {
        timedOut = true;
        log.debug(`capture: the harness ran past ${options.timeoutMs} ms, ending it`);
        endTree();
      }, options.timeoutMs)
    : undefined;
  let watchdog: ReturnType<typeof startWatchdog> | undefined;
  try {
    child = execa(file, args, {
      cwd: options.cwd,
      env: options.env,
      extendEnv: false,
      stdin: options.stdin,
      detached: group,
      stdout: options.stdio,
      stderr: options.stdio,
      reject: false,
      preferLocal: true,
      localDir: process.cwd(),
      killSignal: 'SIGTERM',
      forceKillAfterDelay: 5000,
      ...(options.stdio === 'pipe' ? { encoding: 'utf8' as const, maxBuffer: 64 * 1024 * 1024 } : {}),
    });
    watchdog =
      child.pid !== undefined ? startWatchdog(child.pid, group, options.runDir, options.orphaned) : undefined;
    if (options.signal) {
      if (options.signal.aborted) onAbort();
      else options.signal.addEventListener('abort', onAbort, { once: true });
    }
    const result = (await child) as Result;
    if (timedOut) {
      (result as { timedOut: boolean }).timedOut = true;
      // a timed-out harness's tools (a hung test run) die with it
      signalHarness('SIGKILL');
    }
    return { result, interrupted };
  } finally {
    if (timeout) clearTimeout(timeout);
    if (forceKill) clearTimeout(forceKill);
    // a cancelled or timed-out harness has ended: what it started and left behind goes now
    if (abortTree) signalTree(processTree(abortTree), 'SIGKILL');
    options.signal?.removeEventListener('abort', onAbort);
    watchdog?.release();
    for (const [name, handler] of handlers) process.off(name, handler);
  }
}
