/**
 * `polar inspect <traj.jsonl | run-dir>`: writes one self-contained HTML page (docs/inspect.md).
 */
import { existsSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { InputError, UsageError } from '../errors.ts';
import { log } from '../util/log.ts';
import { renderHtml } from './html.ts';
import { isRunDir } from './reader.ts';
import { type ReportOptions, reportForFile, reportForRun } from './report.ts';
import { loadTokenDecoder } from './tokens.ts';

export interface RawInspectOptions {
  output?: string;
  tokenizer?: string;
  maxTokensPerTrace?: string;
  maxTrajectories?: string;
}

function positiveInt(flag: string, value: string | undefined, fallback: number | null): number | null {
  if (value === undefined) return fallback;
  if (value === 'all' && flag === '--max-trajectories') return null;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`${flag} must be a positive integer, got "${value}"`);
  return n;
}

/** Builds the page's HTML for a trajectory file or a run directory. */
export async function inspectToHtml(input: string, options: RawInspectOptions = {}): Promise<string> {
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
    maxTokensPerTrace: positiveInt('--max-tokens-per-trace', options.maxTokensPerTrace, 2000) as number,
    maxTrajectories: positiveInt('--max-trajectories', options.maxTrajectories, run ? 16 : null),
  };
  const decoder = await loadTokenDecoder(options.tokenizer);
  const page = run ? await reportForRun(input, decoder, report) : await reportForFile(input, decoder, report);
  return renderHtml(page);
}

export async function runInspect(input: string, options: RawInspectOptions): Promise<void> {
  const html = await inspectToHtml(input, options);
  const out = options.output ?? 'report.html';
  if (out === '-') {
    process.stdout.write(html);
    return;
  }
  const partial = `${out}.partial`;
  writeFileSync(partial, html);
  renameSync(partial, out);
  log.info(`wrote ${out} (${(Buffer.byteLength(html) / 1024).toFixed(0)} KiB)`);
}
