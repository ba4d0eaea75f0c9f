/**
 * The private run dir a harness gets for its config (CODEX_HOME, CLAUDE_CONFIG_DIR, the Pi agent dir,
 * QWEN_HOME): made with an owner file naming polar's pid, its start time and where that pid means
 * something (src/util/owned-temp.ts: a reused pid is not the owner, a pid of another pid namespace is
 * not looked up), so a dir left by a polar that was killed outright
 * (SIGKILL, OOM) is found and removed when the next capture starts in the same place. The watchdog
 * (watchdog.mjs) removes it at once when it can; this sweep is the backstop.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { hostKey, processGone, processStart } from '../util/owned-temp.ts';

export const RUN_DIR_PREFIX = 'polar-run-';
const OWNER_FILE = 'polar-owner.json';

export async function makeRunDir(base: string): Promise<string> {
  await removeStaleRunDirs(base);
  const dir = await mkdtemp(join(base, RUN_DIR_PREFIX));
  const owner = { pid: process.pid, start: processStart('self') ?? undefined, host: hostKey() };
  await writeFile(join(dir, OWNER_FILE), JSON.stringify({ ...owner, started_at: new Date() }));
  return dir;
}

/** Removes the run dirs under `base` whose owning polar process is gone; returns the dirs removed. */
export async function removeStaleRunDirs(base: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(base);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith(RUN_DIR_PREFIX)) continue;
    const dir = join(base, name);
    let owner: { pid?: unknown; start?: unknown; host?: unknown };
    try {
      owner = JSON.parse(await readFile(join(dir, OWNER_FILE), 'utf8')) as typeof owner;
    } catch {
      continue; // not ours, or still being made: leave it
    }
    const { pid, start, host } = owner;
    if (typeof pid !== 'number' || pid === process.pid) continue;
    const recorded = {
      pid,
      ...(typeof start === 'string' ? { start } : {}),
      ...(typeof host === 'string' ? { host } : {}),
    };
    if (!processGone(recorded)) continue;
    await rm(dir, { recursive: true, force: true }).then(
      () => removed.push(dir),
      () => undefined,
    );
  }
  return removed;
}

const WATCHDOG = fileURLToPath(new URL('./watchdog.mjs', import.meta.url));

export interface Watchdog {
  /** polar is done with the harness: the watchdog exits without touching it */
  release(): void;
}

/**
 * Starts the watchdog for a running harness: a small node process in its own process group that ends
 * the harness (its group when `group`, else its process tree), runs `orphaned` (a command that ends what
 * runs elsewhere: a container's `rm -f`) and removes `runDir` if polar dies first.
 */
export function startWatchdog(
  harnessPid: number,
  group: boolean,
  runDir: string | null,
  orphaned: string[] = [],
): Watchdog {
  const args = [WATCHDOG, String(harnessPid), group ? '1' : '0', runDir ?? '-', ...orphaned];
  const child = spawn(process.execPath, args, {
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  child.unref();
  const stdin = child.stdin as Writable;
  stdin.on('error', () => {});
  (stdin as Writable & { unref?: () => void }).unref?.();
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      stdin.end('done\n');
    },
  };
}
