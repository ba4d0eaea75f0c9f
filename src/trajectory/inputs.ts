/** The inputs of `polar build`: files, directories scanned for *.jsonl, and `-` for stdin. */
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { InputError } from '../errors.ts';

export interface ScannedInputs {
  /** every input file in order (`-` stays as it is) */
  files: string[];
  /** files found by scanning a directory (not named by the user): non-capture JSONL there is skipped */
  discovered: ReadonlySet<string>;
}

/** Whether a parsed first line looks like a capture record at all (any version, any capture type). */
export function captureShaped(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const { v, type } = value as { v?: unknown; type?: unknown };
  return typeof v === 'number' && ['session', 'call', 'session_end', 'grading'].includes(String(type));
}

/** Expands the inputs: directories to their *.jsonl files (sorted, recursive); `-` stays. */
export async function scanInputs(inputs: readonly string[]): Promise<ScannedInputs> {
  const files: string[] = [];
  const discovered = new Set<string>();
  for (const input of inputs) {
    if (input === '-') {
      files.push(input);
      continue;
    }
    let info: Awaited<ReturnType<typeof stat>>;
    try {
      info = await stat(input);
    } catch {
      throw new InputError(input, undefined, undefined, 'no such file or directory');
    }
    if (!info.isDirectory()) {
      files.push(input);
      continue;
    }
    const entries = await readdir(input, { recursive: true, withFileTypes: true });
    const found = entries
      .filter((e) => e.isFile() && e.name.endsWith('.jsonl'))
      .map((e) => join(e.parentPath ?? (e as { path?: string }).path ?? input, e.name))
      .sort();
    for (const file of found) discovered.add(file);
    files.push(...found);
  }
  return { files, discovered };
}

/** Expands the inputs: directories to their *.jsonl files (sorted, recursive); `-` stays. */
export async function expandInputs(inputs: readonly string[]): Promise<string[]> {
  return (await scanInputs(inputs)).files;
}
