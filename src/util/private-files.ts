/**
 * What polar writes holds prompts, code and tool output: captures, trajectories (`polar build -o`),
 * inspect reports, eval and gym results, predictions, patches, test logs. Such files are created 0600 in
 * folders created 0700 (an existing file or folder keeps its mode), whatever the umask leaves.
 */
import { mkdirSync } from 'node:fs';
import { appendFile, mkdir, rename, writeFile } from 'node:fs/promises';

/** the mode of a file polar creates */
export const PRIVATE_FILE = 0o600;
/** the mode of a script polar writes for a scheduler to run (it may hold a server's credentials) */
export const PRIVATE_SCRIPT = 0o700;
/** the mode of a folder polar creates */
export const PRIVATE_DIR = 0o700;

/** Creates a folder and its missing parents, 0700. */
export async function mkdirPrivate(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR });
}

export function mkdirPrivateSync(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR });
}

/** Writes a whole file through a temporary one and a rename: a reader sees the old or the new file, 0600. */
export async function writeAtomic(path: string, content: string): Promise<void> {
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  await writeFile(tmp, content, { mode: PRIVATE_FILE });
  await rename(tmp, path);
}

/** Appends to a file, created 0600 when it is new. */
export async function appendPrivate(path: string, content: string): Promise<void> {
  await appendFile(path, content, { mode: PRIVATE_FILE });
}
