/**
 * Names that come from data (a row's instance_id, a repo's owner/name, a task index) and become file or
 * folder names: restricted to [A-Za-z0-9._-] (no separator, not `.` or `..`), and every path built from
 * them checked to stay inside its folder after resolving. One place for eval, gym, serve and loop.
 */
import { isAbsolute, relative, resolve } from 'node:path';
import { PolarError } from '../errors.ts';

/** A name or path from data that would leave its folder. */
export class UnsafePathError extends PolarError {}

const NAME = /^[A-Za-z0-9._-]{1,200}$/;

/** true for a name that can be a file name on its own: [A-Za-z0-9._-], 1-200 characters, not only dots */
export function isSafeName(value: string): boolean {
  return NAME.test(value) && !/^\.+$/.test(value);
}

/** true for `owner/name` with both parts safe names (a repository under --repos or on GitHub) */
export function isRepoName(value: string): boolean {
  const parts = value.split('/');
  return parts.length === 2 && parts.every(isSafeName);
}

export const SAFE_NAME_RULE = 'letters, digits, ".", "_" and "-" only (1-200 characters, not only dots)';

/** dir/parts resolved, when it stays inside dir (dir itself excluded); else an UnsafePathError */
export function insideDir(dir: string, ...parts: string[]): string {
  const root = resolve(dir);
  const target = resolve(root, ...parts);
  const rel = relative(root, target);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel))
    throw new UnsafePathError(`${parts.join('/')} would leave ${root}`);
  return target;
}
