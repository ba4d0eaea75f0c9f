/**
 * Temporary folders that name their owner (issue 43, item 4): `polar-<kind>-<host>.<pid>.<start>-XXXXXX`,
 * where `pid` and `start` (the process's start time, in clock ticks since boot: /proc/<pid>/stat field
 * 22) name the polar that made it, and `host` (8 hex digits of a hash of the boot id and the pid
 * namespace) says where that pid means something. The name is made by mkdtemp in one step, so no folder
 * ever exists without its owner, and nothing inside it can change who that is.
 *
 * A polar killed outright (SIGKILL, an OOM kill) removes nothing; its reaper (src/rollout/reaper.mjs)
 * does, and where the reaper died too, the next polar that makes such a folder in the same parent
 * removes the folders whose owner is gone: no process with that pid, or one started at another time
 * (a reused pid is not the owner). Never a folder of a live process, never one from another pid
 * namespace or boot (`host` differs: its owner cannot be looked up from here), never a folder without
 * the stamp (`--keep-envs` makes those, to be kept).
 */
import { createHash } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { chmod, lstat, mkdtemp, readdir, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';

const STAMPED = /^polar-[a-z]+-([0-9a-f]{8})\.(\d+)\.(\d+)-[A-Za-z0-9]{6}$/;

/** A process's start time in clock ticks since boot, or null (no such process, or no /proc). */
export function processStart(pid: number | 'self'): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // (the command name, field 2, is in parentheses and may hold spaces: count from after it)
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

let key: string | undefined;
/** where a pid means something: this boot and this pid namespace (or this host, without /proc) */
export function hostKey(): string {
  if (key === undefined) {
    let where: string;
    try {
      where = `${readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()} ${readlinkSync('/proc/self/ns/pid')}`;
    } catch {
      where = `${hostname()} (no /proc)`;
    }
    key = createHash('sha256').update(where).digest('hex').slice(0, 8);
  }
  return key;
}

/** This process's stamp: `<host>.<pid>.<start>`. */
export function ownerStamp(): string {
  return `${hostKey()}.${process.pid}.${processStart('self') ?? '0'}`;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether the process `owner` names is gone: false when it cannot be told (another host key: another
 * pid namespace or boot), so the folder is kept. Without `start` (an owner recorded by an older polar)
 * only the pid is asked.
 */
export function processGone(owner: { host?: string; pid: number; start?: string }): boolean {
  if (owner.host !== undefined && owner.host !== hostKey()) return false;
  if (owner.pid === process.pid) return owner.start !== undefined && owner.start !== processStart('self');
  const start = processStart(owner.pid);
  if (start !== null) return owner.start !== undefined && start !== owner.start;
  // no /proc entry: gone, unless /proc cannot be read here at all and the pid answers a signal
  return processStart('self') !== null || !alive(owner.pid);
}

/** Whether the polar a stamped folder names is gone (false when it cannot be told: kept). */
export function ownerGone(name: string): boolean {
  const m = STAMPED.exec(name);
  return m !== null && processGone({ host: m[1]!, pid: Number(m[2]), start: m[3]! });
}

/** rm -rf that also gets through folders made unwritable inside (an agent's chmod) */
export async function removeFolder(dir: string): Promise<void> {
  try {
    await rm(dir, { recursive: true, force: true });
  } catch {
    await makeWritable(dir);
    await rm(dir, { recursive: true, force: true });
  }
}

async function makeWritable(dir: string): Promise<void> {
  const stat = await lstat(dir).catch(() => null);
  if (!stat?.isDirectory()) return;
  await chmod(dir, 0o700).catch(() => {});
  const entries = await readdir(dir).catch(() => [] as string[]);
  for (const entry of entries) await makeWritable(join(dir, entry));
}

/** Removes the stamped folders in `parent` whose owner is gone; returns those removed. */
export async function removeOrphanedTempDirs(parent: string): Promise<string[]> {
  const names = await readdir(parent).catch(() => [] as string[]);
  const removed: string[] = [];
  for (const name of names) {
    if (!ownerGone(name)) continue;
    const dir = join(parent, name);
    await removeFolder(dir).then(
      () => removed.push(dir),
      () => undefined,
    );
  }
  return removed;
}

const swept = new Map<string, Promise<string[]>>();

/**
 * A fresh folder `<parent>/polar-<kind>-<stamp>-XXXXXX`. The first one a process makes in a parent first
 * removes that parent's folders of polars that are gone.
 */
export async function ownedTempDir(parent: string, kind: string): Promise<string> {
  let sweep = swept.get(parent);
  if (!sweep) {
    sweep = removeOrphanedTempDirs(parent);
    swept.set(parent, sweep);
  }
  await sweep;
  return mkdtemp(join(parent, `polar-${kind}-${ownerStamp()}-`));
}
