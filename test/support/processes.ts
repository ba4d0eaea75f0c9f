/**
 * Whether a process a test started (or a process polar started for it) still runs, read from /proc: the
 * tests that kill polar, cancel a harness or time it out check what is left (Linux only, as those tests).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** A process's state letter, parent pid and process group; null once it is gone. */
export function procStat(pid: number): { state: string; ppid: number; pgrp: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // (after the command name, which may hold spaces and parentheses: state, ppid, pgrp, ...)
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { state: f[0]!, ppid: Number(f[1]), pgrp: Number(f[2]) };
  } catch {
    return null;
  }
}

/** Runs: neither gone nor a zombie (ended, not yet reaped by its parent). */
export function running(pid: number): boolean {
  const s = procStat(pid);
  return s !== null && s.state !== 'Z' && s.state !== 'X';
}

/** Every running process now in one of `groups`. */
export function membersOf(groups: ReadonlySet<number>): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    const s = procStat(pid);
    if (s && groups.has(s.pgrp) && running(pid)) out.push(pid);
  }
  return out;
}

/**
 * True once `pid` no longer runs, polled every 20 ms for at most `ms`; false after that, and then the
 * process is killed (SIGKILL) so that a failing test leaves nothing running.
 */
export async function endsWithin(pid: number, ms: number): Promise<boolean> {
  for (const t0 = Date.now(); Date.now() - t0 < ms; await new Promise((r) => setTimeout(r, 20)))
    if (!running(pid)) return true;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {}
  return false;
}
