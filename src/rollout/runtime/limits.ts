/**
 * Resource limits of a sandbox and how a hit is told apart. Two mechanisms:
 * - cgroup v2, where a delegated cgroup is available (`--cgroup-parent DIR`, a cgroup v2 directory polar
 *   may write, with memory and pids in its cgroup.subtree_control): one child cgroup per sandbox with
 *   memory.max (the whole tree), memory.swap.max 0 and pids.max; a hit is read from memory.events
 *   (oom_kill) and pids.events (max), so it is known for certain;
 * - rlimits everywhere else: RLIMIT_DATA per process (memory), RLIMIT_NPROC (processes of the sandbox's
 *   own uid, or of its user namespace: Linux >= 5.14 counts them per namespace), RLIMIT_FSIZE (largest
 *   file). A hit shows as a failed allocation or fork in the harness's output, or a signal, and is
 *   classified from those.
 * `polar doctor --runtime sandbox` says which one a machine gets.
 */
import { existsSync } from 'node:fs';
import { access, constants, mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { LimitHit, Limits, RunEnd } from './types.ts';

/** Exit codes of a shell-like parent for a child killed by a signal (128 + number): bwrap reports them so. */
const SIGNAL_CODES: Record<number, string> = { 6: 'SIGABRT', 9: 'SIGKILL', 11: 'SIGSEGV', 25: 'SIGXFSZ' };

const OOM = /out of memory|cannot allocate memory|MemoryError|std::bad_alloc|Allocation failed|heap limit/i;
const PIDS =
  /fork: (?:retry: )?Resource temporarily unavailable|Cannot fork|\bspawn\w* .*EAGAIN|EAGAIN.*\bspawn/i;
const DISK = /File too large|EFBIG|SIGXFSZ|No space left on device|ENOSPC/i;

function signalOf(end: RunEnd): string | null {
  if (end.signal) return end.signal;
  if (end.exitCode !== null && end.exitCode > 128) return SIGNAL_CODES[end.exitCode - 128] ?? null;
  return null;
}

/**
 * Which limit ended a run, from what it ended with (rlimits: no counter to read). A timeout is a
 * timeout; otherwise only a run that did not complete is looked at, so a tool call that hit a limit
 * and was answered (the harness carried on) is not counted as the run's end.
 */
export function classifyEnd(end: RunEnd, events: CgroupEvents | null = null): LimitHit | null {
  if (end.status === 'timeout') return 'agent_timeout';
  if (end.status === 'completed' || end.status === 'interrupted') return null;
  if (events?.oomKills) return 'agent_oom';
  if (events?.pidsMax) return 'agent_pids';
  const signal = signalOf(end);
  if (signal === 'SIGXFSZ') return 'agent_disk';
  const tail = end.output.slice(-4000);
  if (OOM.test(tail)) return 'agent_oom';
  if (DISK.test(tail)) return 'agent_disk';
  if (PIDS.test(tail)) return 'agent_pids';
  return null;
}

export interface CgroupEvents {
  oomKills: number;
  pidsMax: number;
}

/** Reads `key value` lines of a cgroup events file. */
export function eventCount(text: string, key: string): number {
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/** A delegated cgroup v2 directory polar can make sandboxes' cgroups in, or why not. */
export async function checkCgroupParent(dir: string): Promise<{ ok: true } | { ok: false; why: string }> {
  try {
    const controllers = (await readFile(join(dir, 'cgroup.subtree_control'), 'utf8')).split(/\s+/);
    const missing = ['memory', 'pids'].filter((c) => !controllers.includes(c));
    if (missing.length)
      return { ok: false, why: `${dir}/cgroup.subtree_control lacks ${missing.join(' and ')}` };
    await access(dir, constants.W_OK);
    return { ok: true };
  } catch (error) {
    return { ok: false, why: `${dir} is not a writable cgroup v2 directory (${(error as Error).message})` };
  }
}

/** One sandbox's cgroup: limits written before anything joins it, events read after, removed at the end. */
export class SandboxCgroup {
  private constructor(readonly dir: string) {}

  static async create(parent: string, name: string, limits: Limits): Promise<SandboxCgroup> {
    const dir = join(parent, name);
    await mkdir(dir);
    if (limits.memoryBytes) {
      await writeFile(join(dir, 'memory.max'), String(limits.memoryBytes));
      if (existsSync(join(dir, 'memory.swap.max'))) await writeFile(join(dir, 'memory.swap.max'), '0');
    }
    if (limits.pids) await writeFile(join(dir, 'pids.max'), String(limits.pids));
    return new SandboxCgroup(dir);
  }

  get procs(): string {
    return join(this.dir, 'cgroup.procs');
  }

  async events(): Promise<CgroupEvents> {
    const read = (file: string) => readFile(join(this.dir, file), 'utf8').catch(() => '');
    return {
      oomKills: eventCount(await read('memory.events'), 'oom_kill'),
      pidsMax: eventCount(await read('pids.events'), 'max'),
    };
  }

  /** kills what is left in it (cgroup.kill, Linux >= 5.14) and removes it */
  async remove(): Promise<void> {
    await writeFile(join(this.dir, 'cgroup.kill'), '1').catch(() => {});
    for (let i = 0; i < 20; i++) {
      try {
        await rmdir(this.dir);
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }
}
