/**
 * `polar inspect <traj.jsonl | run-dir>`: writes one self-contained HTML page (docs/inspect.md).
 */
import { existsSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { EXIT, InputError } from '../errors.ts';
import { LOOP_FILES } from '../loop/files.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { checkOutputFile } from '../options/output.ts';
import { log } from '../util/log.ts';
import { PRIVATE_FILE } from '../util/private-files.ts';
import { renderHtml } from './html.ts';
import { isRunDir, readTrajectoryFile } from './reader.ts';
import { type ReportOptions, reportForFile, reportForRun } from './report.ts';
import { bundledFits, loadTokenDecoder, localTokenizerDir, type TokenDecoder } from './tokens.ts';

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
      `is a directory but not a loop run directory (no ${LOOP_FILES.config}, no step-N/)`,
      'pass a trajectory file written by `polar build`, or the --out directory of `polar loop`',
    );
  }
  const file = run ? null : await readTrajectoryFile(input);
  if (file && file.records.length === 0)
    log.warn(`${input === '-' ? 'stdin' : input} holds no trajectories: the page is empty`);
  const models = file ? [...new Set(file.records.map((r) => r.model))] : [];
  const { decoder, warnings } = await chooseDecoder(options.tokenizer, models);
  for (const w of warnings) log.warn(w);
  const report: ReportOptions = {
    maxTokensPerTrace: options.maxTokensPerTrace ?? DEFAULTS.maxTokensPerTrace.value,
    maxTrajectories:
      options.maxTrajectories === 'all' ? null : (options.maxTrajectories ?? (run ? RUN_TRAJECTORIES : null)),
    warnings,
  };
  const page = run
    ? await reportForRun(input, decoder, report)
    : await reportForFile(input, decoder, report, file ?? undefined);
  return renderHtml(page);
}

/**
 * The tokenizer that decodes the page: --tokenizer, else the trajectories' model's own when its files
 * are at hand (a local directory, the Transformers.js or Hugging Face cache), else the bundled Qwen3
 * one, with a warning when the trajectories name a model outside the Qwen3 family.
 */
export async function chooseDecoder(
  tokenizer: string | undefined,
  models: readonly string[],
  cacheDirs?: readonly string[],
): Promise<{ decoder: TokenDecoder; warnings: string[] }> {
  if (tokenizer) return { decoder: await loadTokenDecoder(tokenizer), warnings: [] };
  const [only] = models;
  const own = models.length === 1 && only ? localTokenizerDir(only, cacheDirs) : null;
  if (own) return { decoder: await loadTokenDecoder(own), warnings: [] };
  const foreign = models.filter((m) => !bundledFits(m));
  const warnings =
    foreign.length > 0
      ? [
          `the trajectories name ${foreign.slice(0, 3).join(', ')}${foreign.length > 3 ? ', ...' : ''}, whose tokenizer files are not at hand: the tokens are decoded with the bundled Qwen3 tokenizer and may read wrong (pass --tokenizer DIR)`,
        ]
      : [];
  return { decoder: await loadTokenDecoder(), warnings };
}

export async function runInspect(input: string, options: InspectFlags): Promise<number> {
  const out = options.output ?? DEFAULTS.inspectOutput.value;
  await checkOutputFile(out, options.output === undefined ? 'the default output' : '--output');
  const html = await inspectToHtml(input, options);
  if (out === '-') {
    process.stdout.write(html);
    return EXIT.ok;
  }
  const partial = `${out}.partial`;
  writeFileSync(partial, html, { mode: PRIVATE_FILE });
  renameSync(partial, out);
  log.info(`wrote ${out} (${(Buffer.byteLength(html) / 1024).toFixed(0)} KiB)`);
  return EXIT.ok;
}
