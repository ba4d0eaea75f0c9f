/**
 * The settings of an evaluation run that change its results, kept in `run.json` of its --out folder so
 * that `--resume` never mixes two settings in one run: another model, sampling, token cap, agent,
 * runtime, grader or time limit is refused, naming the flag. What only changes how the run goes
 * (concurrency, the instance selection, backend URL and call time limits, --samples: more samples of
 * the same setting) may change on resume. docs/eval.md, "One run per --out". Which flags those are is
 * the command's to say (polar eval's: src/eval/settings.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InputError, UsageError } from '../../errors.ts';
import { log } from '../../util/log.ts';
import { writeAtomic } from '../../util/private-files.ts';
import { EVAL_FILES } from './files.ts';

/** flag -> the value it resolved to (undefined: not given, the default applies) */
export type RunSettings = Record<string, unknown>;

const shown = (v: unknown): string => (v === undefined ? '(not given)' : JSON.stringify(v));

/** The flags whose value differs between the run's settings and this command's. */
export function settingsDiff(run: RunSettings, now: RunSettings): string[] {
  const flags = new Set([...Object.keys(run), ...Object.keys(now)]);
  return [...flags].filter((flag) => JSON.stringify(run[flag] ?? null) !== JSON.stringify(now[flag] ?? null));
}

/**
 * Before anything starts: under `--resume`, the run's recorded settings must be this command's; a
 * difference is refused, naming each flag (a run from before run.json existed cannot be checked).
 */
export function checkSettings(out: string, settings: RunSettings, resume: boolean): void {
  const file = join(out, EVAL_FILES.run);
  if (!resume || !existsSync(file)) return;
  let run: RunSettings;
  try {
    run = JSON.parse(readFileSync(file, 'utf8')).settings as RunSettings;
  } catch (error) {
    throw new InputError(file, undefined, undefined, `not the run's settings: ${(error as Error).message}`);
  }
  const changed = settingsDiff(run, settings);
  if (changed.length === 0) return;
  const what = changed.map((flag) => `${flag} ${shown(settings[flag])} (the run: ${shown(run[flag])})`);
  throw new UsageError(
    `--resume: ${what.join(', ')}: this changes the results, and one run would mix two settings`,
    `give the run's value${changed.length > 1 ? 's' : ''} to continue it, or start a new run (another --out, or --overwrite)`,
  );
}

/** When the evaluation starts: checked as above, then recorded in run.json for the next --resume. */
export async function recordSettings(
  out: string,
  settings: RunSettings,
  resume: boolean,
  config?: Record<string, unknown>,
): Promise<void> {
  checkSettings(out, settings, resume);
  const file = join(out, EVAL_FILES.run);
  if (resume && existsSync(file)) return;
  if (resume && existsSync(join(out, EVAL_FILES.results)))
    log.warn(`${out} has no ${EVAL_FILES.run} (a run from an older polar): its settings cannot be checked`);
  // `config`: the options the run was given, which `polar eval --config run.json` reads back
  await writeAtomic(file, `${JSON.stringify({ settings, ...(config ? { config } : {}) }, null, 2)}\n`);
}
