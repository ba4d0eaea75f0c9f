/**
 * Output paths are checked before anything starts (a proxy, a harness, a build): a file flag
 * (`-o/--output FILE`) must not name a directory, its parent folders are created, and the place must be
 * writable. Each problem is a UsageError naming the flag, the path and the fix.
 */
import { existsSync, statSync } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { UsageError } from '../errors.ts';
import { mkdirPrivate } from '../util/private-files.ts';

const reason = (error: unknown): string => {
  const e = error as NodeJS.ErrnoException;
  return e.code === 'EACCES' || e.code === 'EPERM'
    ? 'permission denied'
    : e.code === 'ENOENT'
      ? 'no such place'
      : e.code === 'EROFS'
        ? 'read-only file system'
        : e.code === 'ENOTDIR'
          ? 'a parent is a file, not a folder'
          : (e.code ?? e.message);
};

/** Checks that FILE can be written (- is stdout), creating its parent folders; nothing is truncated. */
export async function checkOutputFile(file: string, flag: string): Promise<void> {
  if (file === '-') return;
  const existed = existsSync(file);
  if (existed && statSync(file).isDirectory()) {
    throw new UsageError(
      `${flag} ${file} is a directory, not a file`,
      `give a file path, for example ${flag} ${join(file, 'out.jsonl')}`,
    );
  }
  const parent = dirname(file);
  try {
    await mkdirPrivate(parent);
  } catch (error) {
    throw new UsageError(`${flag} ${file}: cannot create the folder ${parent} (${reason(error)})`);
  }
  try {
    // opened for appending: an existing file is left as it is
    await (await open(file, 'a')).close();
  } catch (error) {
    throw new UsageError(`${flag} ${file}: cannot be written (${reason(error)})`, 'give a writable path');
  }
  if (!existed) await rm(file, { force: true });
}

/**
 * A flag renamed to the shared name (`--onnx DIR` to `--out DIR`): the old name still works for a
 * release, with a warning. Returns the value given under either name.
 */
export function renamedFlag<T>(
  values: { current: T | undefined; old: T | undefined },
  names: { current: string; old: string },
  warn: (message: string) => void,
): T | undefined {
  if (values.old === undefined) return values.current;
  if (values.current !== undefined && values.current !== values.old)
    throw new UsageError(`${names.old} is the old name of ${names.current}: give one of them`);
  warn(`${names.old} is now ${names.current} (the old name goes in the next release)`);
  return values.old;
}
