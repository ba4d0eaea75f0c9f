/**
 * `polar inspect <traj.jsonl | run-dir>`: writes one self-contained HTML page (docs/inspect.md).
 */
import { existsSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { InputError } from '../errors.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { log } from '../util/log.ts';
import { renderHtml } from './html.ts';
import { isRunDir } from './reader.ts';
import { type ReportOptions, reportForFile, reportForRun } from './report.ts';
import { loadTokenDecoder } from './tokens.ts';

/** `polar inspect` flags after parsing (commands/inspect.ts). */
export interface InspectFlags {
  output?: string;
  tokenizer?: string;
  maxTokensPerTrace?: number;
  /** 'all', or at most this many per file or step (default: all for a file, 16 per step for a run) */
  maxTrajectories?: number | 'all';
}

/** trajectories shown per step of a run when --max-trajectories is not given */
const RUN_TRAJECTORIES = 16;

/** Builds the page's HTML for a trajectory file or a run directory. */
export async function inspectToHtml(input: string, options: InspectFlags = {}): Promise<string> {
  const run = input !== '-' && isRunDir(input);
  if (!run && input !== '-' && !existsSync(input))
    throw new InputError(input, undefined, undefined, 'no such file');
  if (!run && input !== '-' && statSync(input).isDirectory()) {
    throw new InputError(
      input,
      undefined,
      undefined,
      'is a directory but not a loop run directory (no loop.json, no step-N/)',
      'pass a trajectory file written by `polar build`, or the --out directory of `polar loop`',
    );
  }
  const report: ReportOptions = {
    maxTokensPerTrace: options.maxTokensPerTrace ?? DEFAULTS.maxTokensPerTrace.value,
    maxTrajectories:
      options.maxTrajectories === 'all' ? null : (options.maxTrajectories ?? (run ? RUN_TRAJECTORIES : null)),
  };
  const decoder = await loadTokenDecoder(options.tokenizer);
  const page = run ? await reportForRun(input, decoder, report) : await reportForFile(input, decoder, report);
  return renderHtml(page);
}

export async function runInspect(input: string, options: InspectFlags): Promise<number> {
  const html = await inspectToHtml(input, options);
  const out = options.output ?? DEFAULTS.inspectOutput.value;
  if (out === '-') {
    process.stdout.write(html);
    return 0;
  }
  const partial = `${out}.partial`;
  writeFileSync(partial, html);
  renameSync(partial, out);
  log.info(`wrote ${out} (${(Buffer.byteLength(html) / 1024).toFixed(0)} KiB)`);
  return 0;
}
