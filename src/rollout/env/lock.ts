/**
 * A lock folder (`mkdir` is atomic) that holds the pid and host of its owner. A lock whose owner is a
 * process of this host that no longer runs (or that names no owner a minute after it was made) is taken
 * over; one held by a live process, or by another host (a shared cache), is waited for.
 */
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { log } from '../../util/log.ts';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
};

async function owner(lock: string): Promise<{ pid: number; host: string } | null> {
  try {
    const [pid, host] = (await readFile(join(lock, 'owner'), 'utf8')).split('\n');
    return { pid: Number(pid), host: host ?? '' };
  } catch {
    return null;
  }
}

export async function withLock<T>(
  lock: string,
  fn: () => Promise<T>,
  options: { pollMs?: number } = {},
): Promise<T> {
  let told = false;
  for (;;) {
    try {
      await mkdir(lock);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const held = await owner(lock);
    // (no owner yet: just made, or its maker died before writing it; a minute settles which)
    const orphan =
      held === null && Date.now() - ((await stat(lock).catch(() => null))?.mtimeMs ?? 0) > 60_000;
    if (orphan || (held && held.host === hostname() && !alive(held.pid))) {
      await rm(lock, { recursive: true, force: true });
      continue;
    }
    if (!told && held) log.info(`waiting for ${lock}: held by pid ${held.pid} on ${held.host}`);
    told = told || held !== null;
    await new Promise((r) => setTimeout(r, options.pollMs ?? 500));
  }
  try {
    await writeFile(join(lock, 'owner'), `${process.pid}\n${hostname()}\n`);
    return await fn();
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}
