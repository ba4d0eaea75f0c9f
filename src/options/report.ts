/**
 * The experiment-tracking flags of train, loop and eval (--report-to, --run-name, --project,
 * --tensorboard-dir), typed once, and what they resolve to for a run folder: where TensorBoard writes, the
 * W&B project and run name. src/train/tracking/ starts the writer from it (docs/train.md, "Watching a run").
 */
import { basename, join, resolve } from 'node:path';
import { UsageError } from '../errors.ts';
import { DEFAULTS } from './defaults.ts';
import type { ReportTarget } from './parsers.ts';

export interface ReportFlags {
  /** --report-to tensorboard,wandb (default: none) */
  reportTo?: ReportTarget[];
  /** --run-name: the W&B run's name (default: the run folder's name) */
  runName?: string;
  /** --project: the W&B project */
  project?: string;
  /** --tensorboard-dir (default: <run folder>/tensorboard) */
  tensorboardDir?: string;
}

/** What a run reports to; null: nothing (no tracker package is imported, no process started). */
export interface ReportSetup {
  tensorboard: { dir: string } | null;
  wandb: { project: string; name: string; dir: string } | null;
}

/** The folder name of a run's TensorBoard events inside its run folder (default of --tensorboard-dir). */
export const TENSORBOARD_DIR = 'tensorboard';

/** The flags resolved against the run folder `out`; null when --report-to names nothing. */
export function reportSetup(f: ReportFlags, out: string): ReportSetup | null {
  const targets = f.reportTo ?? DEFAULTS.reportTo.value;
  if (targets.length === 0) {
    const stray = [
      f.runName !== undefined ? '--run-name' : null,
      f.project !== undefined ? '--project' : null,
      f.tensorboardDir !== undefined ? '--tensorboard-dir' : null,
    ].filter((x): x is string => x !== null);
    if (stray.length > 0)
      throw new UsageError(
        `${stray.join(', ')} ${stray.length === 1 ? 'is' : 'are'} for a run that reports: add --report-to tensorboard and/or wandb`,
      );
    return null;
  }
  const folder = resolve(out);
  if (f.tensorboardDir !== undefined && !targets.includes('tensorboard'))
    throw new UsageError('--tensorboard-dir is for --report-to tensorboard: add it to --report-to');
  if ((f.project !== undefined || f.runName !== undefined) && !targets.includes('wandb'))
    throw new UsageError('--project and --run-name name a W&B run: add wandb to --report-to');
  return {
    tensorboard: targets.includes('tensorboard')
      ? { dir: resolve(f.tensorboardDir ?? join(folder, TENSORBOARD_DIR)) }
      : null,
    wandb: targets.includes('wandb')
      ? {
          project: f.project ?? DEFAULTS.wandbProject.value,
          name: f.runName ?? basename(folder),
          dir: folder,
        }
      : null,
  };
}
