/**
 * Reads what `polar inspect` shows: a trajectory file (`polar build` output), or a `polar loop` run
 * directory:
 *
 *   run/loop.json                    the resolved loop config
 *   run/step-N/step.json             {step, started_at, ended_at, status, health}
 *   run/step-N/traj.jsonl            trajectories (docs/trajectory-format.md)
 *   run/step-N/build-stats.json      BuildStats (src/trajectory/stats.ts)
 *   run/step-N/train/metrics.jsonl   train worker step events (docs/train.md, "Step metrics")
 *   run/step-N/eval/report.json      eval report of the rollouts (src/rollout/run/report.ts)
 *   run/step-N/heldout/report.json   held-out eval report (held-out steps only)
 *   run/step-N/[eval/]captures/      capture files (counted)
 *   run/step-0/                      the starting policy: its export (skipped), and its held-out eval
 *                                    (heldout/report.json: a row with status "start", the baseline)
 *
 * Every file may be missing (a step still running, no held-out eval); a file that is there but cannot
 * be read (half-written JSON) becomes a warning on the page, never a failure. A bad trajectory line is
 * skipped and counted the same way.
 */
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { z } from 'zod';
import { InputError } from '../errors.ts';
import { LOOP_FILES, stepDirName, stepNumber, stepSummarySchema } from '../loop/files.ts';
import type { StepHealth } from '../loop/health.ts';
import { EVAL_FILES } from '../rollout/run/files.ts';
import { reportSchema } from '../rollout/run/report.ts';
import { CHECKPOINT_FILES, type StepEvent, stepEventSchema } from '../train/schema.ts';
import { readTrajectories } from '../trajectory/reader.ts';
import type { TrajectoryRecord } from '../trajectory/record.ts';
import { type BuildStats, buildStatsSchema } from '../trajectory/stats.ts';
import { parseJsonLine, splitLines, TruncatedLine } from '../util/jsonl.ts';
import { type Lenient, readLenient } from '../util/zod.ts';

export interface TrajectoryFile {
  path: string;
  records: TrajectoryRecord[];
  /** lines that were not valid trajectory records: `file:line: problem` */
  invalid: string[];
}

/** A line of metrics.jsonl: the train worker's `step` event (src/train/schema.ts, docs/train.md). */
export type MetricLine = Lenient<StepEvent> & { step: number };

/** The parts of an eval report.json (src/rollout/run/report.ts `reportSchema`) the page shows. */
export interface EvalSummary {
  pass_at_1: number | null;
  pass_at_1_std: number | null;
  samples: number | null;
  instances: number | null;
  total: number | null;
  counts: Record<string, number>;
}

export interface StepInfo {
  step: number;
  dir: string;
  /** from step.json; 'running' when step.json is missing */
  status: string;
  started_at: string | null;
  ended_at: string | null;
  trajFile: string | null;
  buildStats: Lenient<BuildStats> | null;
  metrics: MetricLine[];
  eval: EvalSummary | null;
  heldout: EvalSummary | null;
  captures: number;
  /** step.json's rollout health (src/loop/health.ts); null for a step without it */
  health: Lenient<StepHealth> | null;
}

export interface RunInfo {
  dir: string;
  config: Record<string, unknown> | null;
  steps: StepInfo[];
  warnings: string[];
}

const CAPTURE_TYPES = new Set(['session', 'call', 'session_end', 'grading']);

/**
 * Reads a trajectory file, skipping (and listing) invalid lines. A file none of whose lines is a
 * trajectory is an error: a capture file names `polar build`, anything else its first problem.
 */
export async function readTrajectoryFile(path: string): Promise<TrajectoryFile> {
  const records: TrajectoryRecord[] = [];
  const invalid: string[] = [];
  for await (const t of readTrajectories(path, {
    skipInvalid: true,
    onInvalid: (e) => invalid.push(e.message),
  })) {
    records.push(t.record);
  }
  if (records.length === 0 && invalid.length > 0) {
    const captureLines = path !== '-' && startsLikeCapture(path) ? 1 : 0;
    throw new InputError(
      path === '-' ? 'stdin' : path,
      undefined,
      undefined,
      captureLines > 0
        ? 'is a capture file (session and call records), not trajectories'
        : `holds no valid trajectory (${invalid.length} invalid ${invalid.length === 1 ? 'line' : 'lines'}; first: ${invalid[0]})`,
      captureLines > 0
        ? `build the trajectories first: polar build ${path === '-' ? '-' : path} -o traj.jsonl, then polar inspect traj.jsonl`
        : 'pass a trajectory file written by polar build',
    );
  }
  return { path, records, invalid };
}

/** Whether the file's first line is a capture record (session, call, session_end, grading). */
function startsLikeCapture(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const buffer = Buffer.alloc(65536);
    const n = readSync(fd, buffer, 0, buffer.length, 0);
    const first = buffer.subarray(0, n).toString('utf8').split('\n')[0] ?? '';
    const type = (JSON.parse(first) as { type?: unknown } | null)?.type;
    return CAPTURE_TYPES.has(String(type));
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}

/** A run directory: has loop.json or step-N folders. */
export function isRunDir(path: string): boolean {
  if (!existsSync(path) || !statSync(path).isDirectory()) return false;
  if (existsSync(join(path, LOOP_FILES.config))) return true;
  return readdirSync(path).some((n) => stepNumber(n) !== null);
}

/** Reads a JSON file; null when absent, a warning when unreadable. */
function readJson(path: string, warnings: string[]): unknown {
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    warnings.push(`${path}: not readable as JSON (${(error as Error).message}); a step still writing it?`);
    return null;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A value read through its writer's schema (src/util/zod.ts readLenient): missing fields are fine (an
 * older polar, a step still running), a field of the wrong type is left out and named in a warning.
 */
function asWritten<T extends z.ZodType>(
  where: string,
  schema: T,
  value: unknown,
  warnings: string[],
): Lenient<z.output<T>> | null {
  if (value === null || value === undefined) return null;
  const { data, problems } = readLenient(schema, value);
  for (const problem of problems) warnings.push(`${where}: ${problem}`);
  return data;
}

/** What the page shows of an eval report.json (reportSchema, src/rollout/run/report.ts). */
export function evalSummary(
  report: unknown,
  warnings: string[] = [],
  where: string = EVAL_FILES.report,
): EvalSummary | null {
  const r = asWritten(where, reportSchema, report, warnings);
  if (r === null) return null;
  const counts: Record<string, number> = {};
  for (const [k, v] of Object.entries(r.counts ?? {})) if (v !== undefined) counts[k] = v;
  return {
    pass_at_1: r.pass_at_1?.mean ?? null,
    pass_at_1_std: r.pass_at_1?.std ?? null,
    samples: r.samples ?? null,
    instances: r.instances ?? null,
    total: r.total ?? null,
    counts,
  };
}

/**
 * metrics.jsonl (stepEventSchema, one `step` event per line): other events are skipped; a line that is
 * not JSON (a half-written last line) is skipped with a warning.
 */
export function readMetrics(path: string, warnings: string[]): MetricLine[] {
  if (!existsSync(path)) return [];
  const out: MetricLine[] = [];
  for (const line of splitLines(readFileSync(path, 'utf8'))) {
    let value: unknown;
    try {
      value = parseJsonLine(path, line);
    } catch (error) {
      warnings.push(
        error instanceof TruncatedLine ? error.message : `${path}:${line.line}: not valid JSON, skipped`,
      );
      continue;
    }
    const event = (value as { event?: unknown } | null)?.event;
    if (event !== undefined && event !== 'step') continue;
    const m = asWritten(`${path}:${line.line}`, stepEventSchema, value, warnings);
    if (m && typeof m.step === 'number') out.push(m as MetricLine);
  }
  return out;
}

function countCaptures(dir: string): number {
  if (!existsSync(dir)) return 0;
  try {
    return readdirSync(dir).filter((n) => n.endsWith('.jsonl')).length;
  } catch {
    return 0;
  }
}

/** step.json's own summary (rollouts / heldout pass@1, stepSummarySchema) when the report file is gone */
function passFrom(v: { pass_at_1?: number | null; samples?: number } | null | undefined): EvalSummary | null {
  // pass_at_1 null: the step ran but no rollout had a result (shown as '–')
  if (v?.pass_at_1 === undefined) return null;
  return {
    pass_at_1: v.pass_at_1,
    pass_at_1_std: null,
    samples: v.samples ?? null,
    instances: null,
    total: null,
    counts: {},
  };
}

export function readStep(dir: string, step: number, warnings: string[]): StepInfo {
  const metaPath = join(dir, LOOP_FILES.step);
  const m = asWritten(metaPath, stepSummarySchema, readJson(metaPath, warnings), warnings) ?? {};
  const traj = join(dir, LOOP_FILES.trajectories);
  const report = (folder: string): EvalSummary | null => {
    const path = join(dir, folder, EVAL_FILES.report);
    return evalSummary(readJson(path, warnings), warnings, path);
  };
  return {
    step,
    dir,
    status: m.status ?? (step === 0 ? 'start' : 'running'),
    started_at: m.started_at ?? null,
    ended_at: m.ended_at ?? null,
    trajFile: existsSync(traj) ? traj : null,
    buildStats: readBuildStats(join(dir, LOOP_FILES.buildStats), warnings),
    metrics: readMetrics(join(dir, LOOP_FILES.train, CHECKPOINT_FILES.metrics), warnings),
    eval: report(LOOP_FILES.rollouts) ?? passFrom(m.rollouts),
    heldout: report(LOOP_FILES.heldout) ?? passFrom(m.heldout),
    captures:
      countCaptures(join(dir, EVAL_FILES.captures)) +
      countCaptures(join(dir, LOOP_FILES.rollouts, EVAL_FILES.captures)),
    health: (m.health as Lenient<StepHealth> | undefined) ?? null,
  };
}

export function readRunDir(dir: string): RunInfo {
  if (!isRunDir(dir)) {
    throw new InputError(
      dir,
      undefined,
      undefined,
      `not a loop run directory (no ${LOOP_FILES.config}, no step-N/)`,
      'pass a trajectory file (traj.jsonl) or the --out directory of `polar loop`',
    );
  }
  const warnings: string[] = [];
  const config = readJson(join(dir, LOOP_FILES.config), warnings);
  const steps = readdirSync(dir)
    .filter((name) => stepNumber(name) !== null && statSync(join(dir, name)).isDirectory())
    .map((name) => stepNumber(name)!)
    // step-0 holds the starting policy (polar loop's export), not a step: a row only for its held-out
    // eval (the baseline) or a step's files
    .filter(
      (n) =>
        n > 0 ||
        [LOOP_FILES.step, LOOP_FILES.trajectories, join(LOOP_FILES.heldout, EVAL_FILES.report)].some((f) =>
          existsSync(join(dir, stepDirName(0), f)),
        ),
    )
    .sort((a, b) => a - b)
    .map((n) => readStep(join(dir, stepDirName(n)), n, warnings));
  return { dir, config: isObject(config) ? config : null, steps, warnings };
}

/** build-stats.json (buildStatsSchema, src/trajectory/stats.ts); null when absent. */
function readBuildStats(path: string, warnings: string[]): Lenient<BuildStats> | null {
  return asWritten(path, buildStatsSchema, readJson(path, warnings), warnings);
}

/** build-stats.json beside a trajectory file, when there is one. */
export function siblingBuildStats(trajPath: string, warnings: string[]): Lenient<BuildStats> | null {
  if (trajPath === '-') return null;
  return readBuildStats(join(dirname(trajPath), LOOP_FILES.buildStats), warnings);
}

export const displayName = (path: string): string => (path === '-' ? 'stdin' : basename(path));
