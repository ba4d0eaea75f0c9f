/**
 * `polar build` as one function: normalises the command's options (each error names the option, the
 * value and the fix), opens the output, runs the build and prints the report.
 */
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import type { Readable, Writable } from 'node:stream';
import { type InputError, UsageError } from '../errors.ts';
import { checkOutputFile } from '../options/output.ts';
import { type AdvantageKind, advantageKinds } from '../trajectory/advantage.ts';
import { type BuildOptions, buildTrajectories, DEFAULT_EOT_IDS } from '../trajectory/build.ts';
import { type OutputFormat, outputFormats } from '../trajectory/formats.ts';
import { type TraceKind, traceKinds } from '../trajectory/record.ts';
import { type BuildStats, emptyStats, formatStats, statsWarnings } from '../trajectory/stats.ts';
import { log } from '../util/log.ts';
import { PRIVATE_FILE } from '../util/private-files.ts';

/** The options as commander hands them over (strings, booleans). */
export interface RawBuildOptions {
  output?: string;
  format?: string;
  rewards?: string;
  groupBy?: string;
  advantage?: string;
  dropUniformGroups?: boolean;
  /** --max-trace-tokens: longest trace kept (prompt + response tokens) */
  maxTraceTokens?: string;
  /** --max-tokens, build's old name of --max-trace-tokens (deprecated) */
  maxTokens?: string;
  overlong?: string;
  excludeKind?: string;
  requireTokenExact?: boolean;
  skipInvalid?: boolean;
  eotId?: string;
  splice?: boolean;
  stats?: boolean;
  json?: boolean;
  quiet?: boolean;
}

export interface BuildIo {
  stdin?: Readable;
  stdout?: Writable;
}

function oneOf<T extends string>(option: string, value: string, allowed: readonly T[]): T {
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new UsageError(`${option}: '${value}' is not one of ${allowed.join(', ')}`);
}

function idList(option: string, value: string): number[] {
  const ids = value.split(',').map((s) => s.trim());
  if (ids.length === 0 || ids.some((s) => !/^\d+$/.test(s))) {
    throw new UsageError(
      `${option}: '${value}' is not a comma-separated list of token ids`,
      'e.g. --eot-id 151645',
    );
  }
  return ids.map(Number);
}

export function normalizeBuildOptions(
  inputs: string[],
  raw: RawBuildOptions,
): Omit<BuildOptions, 'output' | 'stdin'> & { outputFile: string | null; reportOnly: boolean } {
  if (inputs.length === 0) {
    throw new UsageError(
      'polar build needs at least one input',
      'pass capture files, directories, or - for stdin',
    );
  }
  if (inputs.filter((i) => i === '-').length > 1) throw new UsageError('stdin (-) can be given once');
  const format = oneOf<OutputFormat>('--format', raw.format ?? 'polar', outputFormats);
  const advantage = oneOf<AdvantageKind>('--advantage', raw.advantage ?? 'grpo', advantageKinds);
  const groupBy = raw.groupBy ?? 'task_id';
  if (!['task_id', 'none'].includes(groupBy) && !/^meta:.+/.test(groupBy)) {
    throw new UsageError(`--group-by: '${groupBy}' is not task_id, none or meta:KEY`);
  }
  let maxTokens: number | null = null;
  const maxTrace = raw.maxTraceTokens ?? raw.maxTokens;
  if (maxTrace !== undefined) {
    const flag = raw.maxTraceTokens !== undefined ? '--max-trace-tokens' : '--max-tokens';
    if (!/^\d+$/.test(maxTrace) || Number(maxTrace) < 1) {
      throw new UsageError(`${flag}: '${maxTrace}' is not a positive integer`);
    }
    maxTokens = Number(maxTrace);
  }
  const maxTokensMode = oneOf('--overlong', raw.overlong ?? 'truncate', ['truncate', 'drop'] as const);
  const excludeKinds: TraceKind[] = [];
  if (raw.excludeKind !== undefined) {
    for (const k of raw.excludeKind.split(',').map((s) => s.trim())) {
      excludeKinds.push(oneOf<TraceKind>('--exclude-kind', k, traceKinds));
    }
  }
  if (raw.stats && raw.output !== undefined) {
    throw new UsageError('--stats writes no trajectories: drop -o, or drop --stats to get both');
  }
  if (raw.json && !raw.stats && raw.output === undefined) {
    throw new UsageError(
      '--json prints the report on stdout, where the trajectories go without -o',
      'give -o FILE for the trajectories, or --stats for the report alone',
    );
  }
  return {
    inputs,
    outputFile: raw.output ?? null,
    reportOnly: raw.stats ?? false,
    format,
    rewards: raw.rewards ?? null,
    groupBy,
    advantage,
    dropUniformGroups: raw.dropUniformGroups ?? false,
    maxTokens,
    maxTokensMode,
    excludeKinds,
    requireTokenExact: raw.requireTokenExact ?? false,
    skipInvalid: raw.skipInvalid ?? false,
    eotIds: raw.eotId === undefined ? [...DEFAULT_EOT_IDS] : idList('--eot-id', raw.eotId),
    splice: raw.splice ?? false,
  };
}

const SHOWN_INVALID = 5;

/** A reader that went away (`polar build | head`): the output ends there, quietly, as Unix tools do. */
export function isClosedPipe(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === 'EPIPE';
}

/**
 * Runs `polar build`; returns the report. The report goes to stderr, or stdout under --stats or --json
 * (with -o). A closed stdout ends the build quietly.
 */
export async function runBuild(
  inputs: string[],
  raw: RawBuildOptions,
  io: BuildIo = {},
): Promise<BuildStats> {
  const { outputFile, reportOnly, ...options } = normalizeBuildOptions(inputs, raw);
  if (raw.maxTokens !== undefined && raw.maxTraceTokens === undefined)
    log.warn('--max-tokens of polar build is now --max-trace-tokens (the old name goes in the next release)');
  if (outputFile !== null) await checkOutputFile(outputFile, '--output');
  const stdout = io.stdout ?? process.stdout;
  let invalid = 0;
  const onInvalid = (error: InputError): void => {
    invalid++;
    if (invalid <= SHOWN_INVALID) log.warn(`skipped ${error.message}`);
  };

  let output: Writable | null = reportOnly ? null : stdout;
  // a reader that goes away (`| head`) must not crash the process; the next write reports it
  let closed = false;
  const onStdoutError = (error: unknown): void => {
    if (isClosedPipe(error)) closed = true;
  };
  stdout.on('error', onStdoutError);
  const partial = outputFile === null ? null : `${outputFile}.partial`;
  if (partial !== null) {
    output = createWriteStream(partial, { mode: PRIVATE_FILE });
    await once(output, 'open');
  }
  let stats: BuildStats;
  try {
    stats = await buildTrajectories({ ...options, output, stdin: io.stdin, onInvalid });
    if (partial !== null && output !== null) {
      const stream = output;
      await new Promise<void>((resolve, reject) => {
        stream.once('error', reject);
        stream.end(() => resolve());
      });
      await rename(partial, outputFile!);
    }
  } catch (error) {
    if (partial !== null) {
      output?.destroy();
      await rm(partial, { force: true });
    }
    if (output === stdout && (closed || isClosedPipe(error))) return emptyStats();
    throw error;
  }
  if (invalid > SHOWN_INVALID) log.warn(`... and ${invalid - SHOWN_INVALID} more invalid lines skipped`);

  const report = raw.json ? JSON.stringify(stats, null, 2) : formatStats(stats);
  if (reportOnly || raw.json) {
    if (!closed) stdout.write(`${report}\n`);
  } else if (!raw.quiet) log.raw(report);
  for (const warning of statsWarnings(stats, options.advantage ?? 'grpo')) log.warn(warning);
  return stats;
}
