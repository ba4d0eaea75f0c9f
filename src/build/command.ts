/**
 * `polar build` as one function: typed flags in (parsed once by commands/build.ts with
 * src/options/parsers.ts), the rules between flags checked, the output opened, the build run and the
 * report printed.
 */
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import type { Readable, Writable } from 'node:stream';
import { EXIT, InputError, UsageError } from '../errors.ts';
import { DEFAULTS, type OverlongMode, type UnparsedToolCallMode } from '../options/defaults.ts';
import { checkOutputFile, renamedFlag } from '../options/output.ts';
import { type BuildOptions, buildTrajectories } from '../trajectory/build.ts';
import type { OutputFormat } from '../trajectory/formats.ts';
import type { GroupBy } from '../trajectory/heads.ts';
import { isParquetPath, writeVerlParquet } from '../trajectory/parquet.ts';
import type { TraceKind } from '../trajectory/record.ts';
import {
  type BuildStats,
  emptyBuildReason,
  emptyStats,
  formatStats,
  statsWarnings,
} from '../trajectory/stats.ts';
import { log } from '../util/log.ts';
import { PRIVATE_FILE } from '../util/private-files.ts';

/** `polar build` flags after parsing (commands/build.ts): numbers are numbers, lists are lists. */
export interface BuildFlags {
  output?: string;
  format: OutputFormat;
  rewards?: string;
  groupBy: GroupBy;
  dropUniformGroups?: boolean;
  /** --max-trace-tokens: longest trace kept (prompt + response tokens) */
  maxTraceTokens?: number;
  /** --max-tokens, build's old name of --max-trace-tokens (deprecated) */
  maxTokens?: number;
  /** over --max-trace-tokens: truncate the trace (default) or drop the trajectory */
  overMaxTraceTokens: 'truncate' | 'drop';
  /** --overlong (src/options/parsers.ts overlongMode); truncate|drop: the old --over-max-trace-tokens */
  overlong: OverlongMode | 'truncate' | 'drop';
  overlongBuffer: number;
  excludeKind?: TraceKind[];
  requireTokenExact?: boolean;
  skipInvalid?: boolean;
  eotId: readonly number[];
  splice?: boolean;
  /** --unparsed-tool-calls, parsed by commander (src/options/parsers.ts oneOf) */
  unparsedToolCalls?: UnparsedToolCallMode;
  stats?: boolean;
  json?: boolean;
  quiet?: boolean;
  /** --advantage, gone from build (polar train computes advantages): deprecated, ignored with a warning */
  advantage?: string;
}

/** One build as code runs it (polar build, polar loop): the build's options and where its output goes. */
export interface BuildRun extends Omit<BuildOptions, 'output' | 'stdin' | 'onInvalid'> {
  /** -o FILE (written as FILE.partial, then renamed); absent: stdout */
  outputFile?: string;
  /** --stats: the report on stdout, no trajectories */
  reportOnly?: boolean;
  /** --json: the report as JSON on stdout */
  json?: boolean;
  /** -q: no report on stderr */
  quiet?: boolean;
}

export interface BuildIo {
  stdin?: Readable;
  stdout?: Writable;
}

/** The build the flags ask for; the rules between flags are UsageErrors naming them. */
export function buildRun(
  inputs: string[],
  f: BuildFlags,
  warn: (message: string) => void = (m) => log.warn(m),
): BuildRun {
  if (inputs.length === 0) {
    throw new UsageError(
      'polar build needs at least one input',
      'pass capture files, directories, or - for stdin',
    );
  }
  if (inputs.filter((i) => i === '-').length > 1) throw new UsageError('stdin (-) can be given once');
  if (f.stats && f.output !== undefined) {
    throw new UsageError('--stats writes no trajectories: drop -o, or drop --stats to get both');
  }
  if (f.json && !f.stats && f.output === undefined) {
    throw new UsageError(
      '--json prints the report on stdout, where the trajectories go without -o',
      'give -o FILE for the trajectories, or --stats for the report alone',
    );
  }
  if (f.output !== undefined && isParquetPath(f.output) && f.format !== 'verl')
    throw new UsageError(
      `-o ${f.output}: polar trajectories are JSON lines, Parquet is for --format verl`,
      'give -o FILE.jsonl, or --format verl for verl rows in Parquet',
    );
  if (f.advantage !== undefined)
    warn(
      `polar build --advantage is ignored: polar train computes the advantages from the rewards and groups (polar train --advantage ${f.advantage === 'none' ? 'KIND' : f.advantage}; docs/train.md); the flag goes in the next release`,
    );
  const maxTokens = renamedFlag(
    { current: f.maxTraceTokens, old: f.maxTokens },
    { current: '--max-trace-tokens', old: '--max-tokens' },
    warn,
  );
  const { overlong, maxTokensMode } = overlongFlags(f, warn);
  return {
    inputs,
    ...(f.output !== undefined ? { outputFile: f.output } : {}),
    reportOnly: f.stats ?? false,
    json: f.json ?? false,
    quiet: f.quiet ?? false,
    format: f.format,
    rewards: f.rewards ?? null,
    groupBy: f.groupBy,
    dropUniformGroups: f.dropUniformGroups ?? false,
    maxTokens: maxTokens ?? null,
    maxTokensMode,
    overlong,
    overlongBuffer: f.overlongBuffer,
    excludeKinds: f.excludeKind ?? [],
    requireTokenExact: f.requireTokenExact ?? false,
    skipInvalid: f.skipInvalid ?? false,
    eotIds: f.eotId,
    splice: f.splice ?? false,
    unparsedToolCalls: f.unparsedToolCalls,
  };
}

/**
 * --overlong mask|penalty|keep, and build's old --overlong truncate|drop (now --over-max-trace-tokens:
 * what a trace over --max-trace-tokens becomes), which still works for a release with a warning.
 */
function overlongFlags(
  f: Pick<BuildFlags, 'overlong' | 'overMaxTraceTokens'>,
  warn: (message: string) => void,
): { overlong: OverlongMode; maxTokensMode: 'truncate' | 'drop' } {
  if (f.overlong !== 'truncate' && f.overlong !== 'drop')
    return { overlong: f.overlong, maxTokensMode: f.overMaxTraceTokens };
  if (f.overMaxTraceTokens !== DEFAULTS.overMaxTraceTokens.value && f.overMaxTraceTokens !== f.overlong)
    throw new UsageError(
      `--overlong ${f.overlong} is the old name of --over-max-trace-tokens ${f.overlong}: give one of them`,
    );
  warn(
    `--overlong ${f.overlong} is now --over-max-trace-tokens ${f.overlong}; --overlong says what an overlong trace trains (mask, penalty, keep) (the old values go in the next release)`,
  );
  return { overlong: DEFAULTS.overlong.value, maxTokensMode: f.overlong };
}

/** The body of `polar build`: typed flags in, the build, exit code out. */
export async function buildCommand(inputs: string[], flags: BuildFlags): Promise<number> {
  await runBuild(buildRun(inputs, flags));
  return EXIT.ok;
}

const SHOWN_INVALID = 5;

/** A reader that went away (`polar build | head`): the output ends there, quietly, as Unix tools do. */
export function isClosedPipe(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === 'EPIPE';
}

/**
 * Runs one build; returns the report. The report goes to stderr, or stdout under --stats or --json
 * (with -o). A closed stdout ends the build quietly.
 */
export async function runBuild(run: BuildRun, io: BuildIo = {}): Promise<BuildStats> {
  const { outputFile, reportOnly = false, json = false, quiet = false, ...options } = run;
  if (outputFile !== undefined) await checkOutputFile(outputFile, '--output');
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
  const partial = outputFile === undefined ? null : `${outputFile}.partial`;
  if (partial !== null) {
    output = createWriteStream(partial, { mode: PRIVATE_FILE });
    await once(output, 'open');
  }
  let stats: BuildStats;
  let empty: string | null = null;
  try {
    stats = await buildTrajectories({ ...options, output, stdin: io.stdin, onInvalid });
    // no trajectory: an error (exit 3) with its reason; an existing -o file is left as it was
    if (!reportOnly) empty = emptyBuildReason(stats);
    if (partial !== null && output !== null) {
      const stream = output;
      await new Promise<void>((resolve, reject) => {
        stream.once('error', reject);
        stream.end(() => resolve());
      });
      if (empty) await rm(partial, { force: true });
      else if (isParquetPath(outputFile!)) {
        // -o FILE.parquet (--format verl): the rows streamed as JSON lines, then written as Parquet
        await writeVerlParquet(partial, `${partial}.parquet`);
        await rm(partial, { force: true });
        await rename(`${partial}.parquet`, outputFile!);
      } else await rename(partial, outputFile!);
    }
  } catch (error) {
    if (partial !== null) {
      output?.destroy();
      await rm(partial, { force: true });
      await rm(`${partial}.parquet`, { force: true });
    }
    if (output === stdout && (closed || isClosedPipe(error))) return emptyStats();
    throw error;
  }
  if (invalid > SHOWN_INVALID) log.warn(`... and ${invalid - SHOWN_INVALID} more invalid lines skipped`);

  const report = json ? JSON.stringify(stats, null, 2) : formatStats(stats);
  if (reportOnly || json) {
    if (!closed) stdout.write(`${report}\n`);
  } else if (!quiet) log.raw(report);
  if (empty)
    throw new InputError(
      options.inputs.join(', '),
      undefined,
      undefined,
      `no trajectory written: ${empty}`,
      'build captures of runs that made model calls (polar capture, polar eval with a harness); the report above counts every skip by cause',
    );
  for (const warning of statsWarnings(stats)) log.warn(warning);
  return stats;
}
