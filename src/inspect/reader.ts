/**
 * Reads what `polar inspect` shows: a trajectory file (`polar build` output), or a `polar loop` run
 * directory:
 *
 *   run/loop.json                    the resolved loop config
 *   run/step-N/step.json             {step, started_at, ended_at, status}
 *   run/step-N/traj.jsonl            trajectories (docs/trajectory-format.md)
 *   run/step-N/build-stats.json      BuildStats (src/trajectory/stats.ts)
 *   run/step-N/train/metrics.jsonl   train worker step events (docs/train.md, "Step metrics")
 *   run/step-N/eval/report.json      eval report of the rollouts (src/eval/report.ts)
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
import { InputError } from '../errors.ts';
import { EVAL_FILES } from '../eval/files.ts';
import { LOOP_FILES, stepDirName } from '../loop/files.ts';
import { CHECKPOINT_FILES } from '../train/schema.ts';
import { readTrajectories } from '../trajectory/reader.ts';
import type { TrajectoryRecord } from '../trajectory/record.ts';
import type { BuildStats } from '../trajectory/stats.ts';

export interface TrajectoryFile {
  path: string;
  records: TrajectoryRecord[];
  /** lines that were not valid trajectory records: `file:line: problem` */
  invalid: string[];
}

/** The train worker's `step` event as written to metrics.jsonl (docs/train.md). */
export interface MetricLine {
  step: number;
  loss?: number | null;
  pg_loss?: number | null;
  kl?: number | null;
  clip_frac?: number | null;
  entropy?: number | null;
  grad_norm?: number | null;
  tokens_per_s?: number | null;
  lr?: number | null;
  tokens?: number | null;
  trained_tokens?: number | null;
  step_time_s?: number | null;
  gpu_mem_gb?: number | null;
  [key: string]: unknown;
}

/** The parts of an eval report.json (src/eval/report.ts `Report`) the page shows. */
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
  buildStats: BuildStats | null;
  metrics: MetricLine[];
  eval: EvalSummary | null;
  heldout: EvalSummary | null;
  captures: number;
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
  return readdirSync(path).some((n) => /^step-\d+$/.test(n));
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
const numOrNull = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const strOrNull = (v: unknown): string | null => (typeof v === 'string' ? v : null);

export function evalSummary(report: unknown): EvalSummary | null {
  if (!isObject(report)) return null;
  const p = isObject(report.pass_at_1) ? report.pass_at_1 : {};
  const counts: Record<string, number> = {};
  if (isObject(report.counts)) {
    for (const [k, v] of Object.entries(report.counts)) if (typeof v === 'number') counts[k] = v;
  }
  return {
    pass_at_1: numOrNull(p.mean),
    pass_at_1_std: numOrNull(p.std),
    samples: numOrNull(report.samples),
    instances: numOrNull(report.instances),
    total: numOrNull(report.total),
    counts,
  };
}

/** metrics.jsonl: the `step` events; other lines and a half-written last line are skipped. */
export function readMetrics(path: string, warnings: string[]): MetricLine[] {
  if (!existsSync(path)) return [];
  const out: MetricLine[] = [];
  const lines = readFileSync(path, 'utf8').split('\n');
  lines.forEach((text, i) => {
    if (text.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      warnings.push(`${path}:${i + 1}: not valid JSON, skipped`);
      return;
    }
    if (!isObject(value) || typeof value.step !== 'number') return;
    if (value.event !== undefined && value.event !== 'step') return;
    out.push(value as MetricLine);
  });
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

/** step.json's own summary ({pass_at_1}) when the report file is gone */
function passFrom(v: unknown): EvalSummary | null {
  if (!isObject(v) || numOrNull(v.pass_at_1) === null) return null;
  return {
    pass_at_1: numOrNull(v.pass_at_1),
    pass_at_1_std: null,
    samples: numOrNull(v.samples),
    instances: null,
    total: null,
    counts: {},
  };
}

export function readStep(dir: string, step: number, warnings: string[]): StepInfo {
  const meta = readJson(join(dir, LOOP_FILES.step), warnings);
  const m = isObject(meta) ? meta : {};
  const traj = join(dir, LOOP_FILES.trajectories);
  const stats = readJson(join(dir, LOOP_FILES.buildStats), warnings);
  return {
    step,
    dir,
    status: strOrNull(m.status) ?? (step === 0 ? 'start' : 'running'),
    started_at: strOrNull(m.started_at),
    ended_at: strOrNull(m.ended_at),
    trajFile: existsSync(traj) ? traj : null,
    buildStats: isObject(stats) ? (stats as unknown as BuildStats) : null,
    metrics: readMetrics(join(dir, LOOP_FILES.train, CHECKPOINT_FILES.metrics), warnings),
    eval:
      evalSummary(readJson(join(dir, LOOP_FILES.rollouts, EVAL_FILES.report), warnings)) ??
      passFrom(m.rollouts),
    heldout:
      evalSummary(readJson(join(dir, LOOP_FILES.heldout, EVAL_FILES.report), warnings)) ??
      passFrom(m.heldout),
    captures:
      countCaptures(join(dir, EVAL_FILES.captures)) +
      countCaptures(join(dir, LOOP_FILES.rollouts, EVAL_FILES.captures)),
  };
}

export function readRunDir(dir: string): RunInfo {
  if (!isRunDir(dir)) {
    throw new InputError(
      dir,
      undefined,
      undefined,
      'not a loop run directory (no loop.json, no step-N/)',
      'pass a trajectory file (traj.jsonl) or the --out directory of `polar loop`',
    );
  }
  const warnings: string[] = [];
  const config = readJson(join(dir, LOOP_FILES.config), warnings);
  const steps = readdirSync(dir)
    .map((n) => /^step-(\d+)$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null && statSync(join(dir, m[0])).isDirectory())
    .map((m) => Number(m[1]))
    // step-0 holds the starting policy (polar loop's export), not a step: a row only for its held-out
    // eval (the baseline) or a step's files
    .filter(
      (n) =>
        n > 0 ||
        [LOOP_FILES.step, LOOP_FILES.trajectories, join(LOOP_FILES.heldout, EVAL_FILES.report)].some((f) =>
          existsSync(join(dir, 'step-0', f)),
        ),
    )
    .sort((a, b) => a - b)
    .map((n) => readStep(join(dir, stepDirName(n)), n, warnings));
  return { dir, config: isObject(config) ? config : null, steps, warnings };
}

/** build-stats.json beside a trajectory file, when there is one. */
export function siblingBuildStats(trajPath: string, warnings: string[]): BuildStats | null {
  if (trajPath === '-') return null;
  const stats = readJson(join(dirname(trajPath), LOOP_FILES.buildStats), warnings);
  return isObject(stats) ? (stats as unknown as BuildStats) : null;
}

export const displayName = (path: string): string => (path === '-' ? 'stdin' : basename(path));
