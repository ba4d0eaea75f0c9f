/**
 * The output folder of an evaluation (`--out DIR`): one run per folder. A non-empty folder is refused
 * unless the run continues it (`--resume`) or replaces it (`--overwrite`, which clears it first), so
 * captures and patches of two runs never mix. Captures are append-only, so a sample that runs again
 * (errored, interrupted) first sets its old capture aside: `captures/<key>.jsonl` becomes
 * `captures/<key>.jsonl.<why>` (not *.jsonl: `polar build` does not read it), and the new run starts a
 * fresh file instead of adding a second session for the same (task, sample).
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { UsageError } from '../../errors.ts';
import { mkdirPrivate } from '../../util/private-files.ts';
import { EVAL_FILES, EVAL_RUN_ENTRIES } from './files.ts';

export interface OutChoice {
  resume?: boolean;
  overwrite?: boolean;
}

/** What an evaluation writes in its folder: --overwrite clears only a folder that holds one of these. */
const RUN_FILES = EVAL_RUN_ENTRIES;

/** Throws when DIR holds files and neither --resume nor --overwrite says what to do with them. */
export function checkOut(dir: string, choice: OutChoice, flag = '--out'): void {
  if (!existsSync(dir)) return;
  if (!statSync(dir).isDirectory())
    throw new UsageError(`${flag} ${dir} is a file, not a directory`, `give ${flag} a directory`);
  if (choice.resume && choice.overwrite)
    throw new UsageError('--resume and --overwrite contradict each other: give one');
  if (choice.resume || readdirSync(dir).every((name) => name === EVAL_FILES.cluster)) return;
  if (choice.overwrite) {
    if (!RUN_FILES.some((name) => existsSync(`${dir}/${name}`)))
      throw new UsageError(
        `--overwrite: ${flag} ${dir} holds files but no evaluation run (no results.jsonl, captures/, ...): polar does not clear it`,
        'give a new folder, or empty this one yourself',
      );
    return;
  }
  throw new UsageError(
    `${flag} ${dir} is not empty: a new run there would mix its captures and results with what is there`,
    'add --resume to continue it, --overwrite to replace it, or give a new folder',
  );
}

/** Checks DIR (checkOut), clears it under --overwrite (only when it holds a run), and makes it. */
export async function prepareOut(dir: string, choice: OutChoice, flag = '--out'): Promise<void> {
  checkOut(dir, choice, flag);
  if (choice.overwrite && existsSync(dir) && readdirSync(dir).length > 0) {
    for (const name of readdirSync(dir)) await rm(`${dir}/${name}`, { recursive: true, force: true });
  }
  await mkdirPrivate(dir);
}

/** Moves FILE to FILE.<why> (FILE.<why>-2, ... when taken); returns the new path, or null when FILE was not there. */
export async function setAside(file: string, why: 'error' | 'interrupted'): Promise<string | null> {
  if (!existsSync(file)) return null;
  let target = `${file}.${why}`;
  for (let n = 2; existsSync(target); n++) target = `${file}.${why}-${n}`;
  await rename(file, target);
  return target;
}
