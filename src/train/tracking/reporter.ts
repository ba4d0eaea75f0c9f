/**
 * The run's one experiment-tracking writer (--report-to tensorboard,wandb): a Python process,
 * `python -m polar_train.report` (src/train/worker/polar_train/report.py), started once per run of polar
 * train, loop or eval, that owns the TensorBoard SummaryWriter and the W&B run. Every figure reaches it as
 * a JSON line on its stdin: the trainer's step events (forwarded from the worker's event stream by the
 * launcher), the loop's rollout figures and rollout health, an eval's report. One process for the whole
 * run, not one writer per training worker: a loop starts a worker per step, and W&B allows one writer of
 * a run at a time (a worker per step would open, resume and finish the run every step, and a rollout
 * figure logged between two workers would need a third writer); the worker's own start is not slowed.
 *
 * The run folder keeps tracking.json (TRACKING_FILE): the W&B run id, so --resume continues the same W&B
 * run, and the TensorBoard folder. A run without --report-to starts nothing and imports neither package.
 * A writer that cannot start, or a run refused before its first step (Reporter.discard), leaves none of
 * the writer's files behind: what was there before the run is kept as it was.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { readdir, rm, rmdir, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { execa, type ResultPromise } from 'execa';
import { z } from 'zod';
import { EnvironmentError, InputError, PolarError } from '../../errors.ts';
import type { ReportSetup } from '../../options/report.ts';
import { log } from '../../util/log.ts';
import { mkdirPrivate, PRIVATE_FILE } from '../../util/private-files.ts';
import { firstIssue } from '../../util/zod.ts';
import { findPython, REPORT_REQUIREMENTS, SETUP_COMMAND, WANDB_REQUIREMENTS } from '../env.ts';
import { WORKER_DIR } from '../launch.ts';

/** tracking.json in the run folder (docs/train.md, "Watching a run") */
export const TRACKING_FILE = 'tracking.json';
/** the writer's own output (wandb's messages, a Python traceback), beside it */
export const TRACKING_LOG = 'tracking.log';

export const trackingSchema = z.object({
  v: z.literal(1),
  tensorboard: z.object({ dir: z.string() }).nullable(),
  wandb: z.object({ id: z.string().regex(/^[a-z0-9]+$/), project: z.string(), name: z.string() }).nullable(),
});
export type TrackingRecord = z.infer<typeof trackingSchema>;

/** The x-axes of a run: the trainer's steps, the loop's steps, an evaluation. */
export type Axis = 'train' | 'loop' | 'eval';

export interface Reporter {
  /** one point per figure at `step` of `axis` (non-finite values and nulls are left out) */
  log(axis: Axis, step: number, values: Record<string, number | null | undefined>): void;
  /** flushes and closes the writers; a failure of the writer is a warning (the run's files hold it all) */
  close(): Promise<void>;
  /**
   * closes the writers and removes what they made in this run (a run refused before its first step):
   * tracking.json and tracking.log as they were before, no new TensorBoard or W&B files, the run folder
   * itself when the writer made it and it is empty
   */
  discard(): Promise<void>;
}

/** A run that reports nowhere. */
export const NO_REPORTER: Reporter = { log() {}, close: async () => {}, discard: async () => {} };

/** The writer's files as they were before it started, to put back (Reporter.discard). */
class Footprint {
  private readonly outExisted: boolean;
  private readonly record: string | null;
  private readonly logSize: number | null;
  /** each tracker folder: its entries before, or null when it did not exist */
  private readonly folders = new Map<string, Set<string> | null>();

  constructor(
    private readonly out: string,
    setup: ReportSetup,
  ) {
    this.outExisted = existsSync(out);
    const record = join(out, TRACKING_FILE);
    this.record = existsSync(record) ? readFileSync(record, 'utf8') : null;
    const logFile = join(out, TRACKING_LOG);
    this.logSize = existsSync(logFile) ? statSync(logFile).size : null;
    const folders = [
      ...(setup.tensorboard ? [setup.tensorboard.dir] : []),
      ...(setup.wandb ? [join(setup.wandb.dir, 'wandb')] : []),
    ];
    for (const dir of folders) this.folders.set(dir, existsSync(dir) ? new Set(readdirSync(dir)) : null);
  }

  /** keepLog: tracking.log stays (an error that cites it) */
  async restore(o: { keepLog?: boolean } = {}): Promise<void> {
    const record = join(this.out, TRACKING_FILE);
    if (this.record === null) await rm(record, { force: true });
    else await writeFile(record, this.record, { mode: PRIVATE_FILE });
    const logFile = join(this.out, TRACKING_LOG);
    if (o.keepLog) {
      // kept
    } else if (this.logSize === null) await rm(logFile, { force: true });
    else if (existsSync(logFile)) await truncate(logFile, this.logSize);
    for (const [dir, before] of this.folders) {
      if (before === null) {
        await rm(dir, { recursive: true, force: true });
        continue;
      }
      const now = existsSync(dir) ? await readdir(dir) : [];
      for (const name of now)
        if (!before.has(name)) await rm(join(dir, name), { recursive: true, force: true });
    }
    // the run folder, when this run made it and nothing else is in it
    if (!this.outExisted && existsSync(this.out) && (await readdir(this.out)).length === 0)
      await rmdir(this.out).catch(() => {});
  }
}

export interface OpenOptions {
  /** the run folder (tracking.json is kept there) */
  out: string;
  /** --resume: the same W&B run id, TensorBoard's steps from `purgeStep` on replaced */
  resume: boolean;
  /** the first step this process logs again (TensorBoard drops what an earlier process wrote from it on) */
  purgeStep?: number | null;
  /** --python (polar train); default: the trainer's Python */
  python?: string | undefined;
  /** the run's settings, recorded as the W&B run's config */
  config?: Record<string, unknown>;
}

/** W&B's run ids: 8 lowercase letters and digits (wandb.util.generate_id). */
function newRunId(): string {
  const chars = 'abcdefghijklmnopqrstuvwxyz0123456789';
  let id = '';
  for (let i = 0; i < 8; i++) id += chars[Math.floor(Math.random() * chars.length)];
  return id;
}

export function readTracking(out: string): TrackingRecord | null {
  const path = join(out, TRACKING_FILE);
  if (!existsSync(path)) return null;
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new InputError(path, undefined, undefined, `not valid JSON (${(error as Error).message})`);
  }
  const parsed = trackingSchema.safeParse(value);
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error);
    throw new InputError(
      path,
      undefined,
      field,
      message,
      'tracking.json is written by polar (docs/train.md)',
    );
  }
  return parsed.data;
}

/** How to install what --report-to needs: tensorboard (the tracking group), wandb (its own group). */
const installHint = (python: string, missing: readonly string[]) => {
  const groups = [
    ...(missing.includes('tensorboard') ? [{ flag: '--report', file: REPORT_REQUIREMENTS }] : []),
    ...(missing.includes('wandb') ? [{ flag: '--wandb', file: WANDB_REQUIREMENTS }] : []),
  ];
  return `install it: ${SETUP_COMMAND} ${groups.map((g) => g.flag).join(' ')} (or ${groups.map((g) => `${python} -m pip install -r ${g.file}`).join(' and ')}); or drop it from --report-to`;
};

// find_spec locates a package without importing it (the run's trackers are imported by the writer alone)
const PACKAGES_PROBE =
  'import importlib.util, json, sys; print(json.dumps({n: importlib.util.find_spec(n) is not None for n in sys.argv[1:]}))';

/** The packages --report-to needs, checked without importing them: a missing one is named with its fix. */
export async function checkReporting(setup: ReportSetup, pythonFlag?: string): Promise<void> {
  const python = (await findPython(pythonFlag ?? process.env.POLAR_PYTHON)).python;
  const wanted = [...(setup.tensorboard ? ['tensorboard'] : []), ...(setup.wandb ? ['wandb'] : [])];
  const r = await execa(python, ['-c', PACKAGES_PROBE, ...wanted], { reject: false, timeout: 60_000 });
  let found: Record<string, boolean> = {};
  try {
    found = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, boolean>;
  } catch {
    found = {};
  }
  const missing = wanted.filter((name) => found[name] !== true);
  if (missing.length > 0)
    throw new EnvironmentError(
      `--report-to: ${missing.join(' and ')} ${missing.length === 1 ? 'is' : 'are'} not installed in ${python}`,
      installHint(python, missing),
    );
}

/** Starts the writer (null setup: none) and waits until it has opened what --report-to asks for. */
export async function openReporter(setup: ReportSetup | null, o: OpenOptions): Promise<Reporter> {
  if (setup === null) return NO_REPORTER;
  const footprint = new Footprint(o.out, setup);
  await mkdirPrivate(o.out);
  const earlier = o.resume ? readTracking(o.out) : null;
  const record: TrackingRecord = {
    v: 1,
    tensorboard: setup.tensorboard ? { dir: setup.tensorboard.dir } : null,
    wandb: setup.wandb
      ? { id: earlier?.wandb?.id ?? newRunId(), project: setup.wandb.project, name: setup.wandb.name }
      : null,
  };
  await writeFile(join(o.out, TRACKING_FILE), `${JSON.stringify(record, null, 2)}\n`, { mode: PRIVATE_FILE });
  const python = (await findPython(o.python ?? process.env.POLAR_PYTHON)).python;
  // events come on fd 3: wandb's service process inherits stdout and stderr (which go to tracking.log)
  // and may outlive the writer, so a pipe it holds would never end
  const logFile = join(o.out, TRACKING_LOG);
  const child = execa(python, ['-m', 'polar_train.report', '--events-fd', '3'], {
    // the caller's PYTHONPATH after the worker's package, as the training worker gets it (launch.ts)
    env: {
      PYTHONPATH: process.env.PYTHONPATH ? `${WORKER_DIR}:${process.env.PYTHONPATH}` : WORKER_DIR,
      PYTHONUNBUFFERED: '1',
      PYTHONDONTWRITEBYTECODE: '1',
    },
    reject: false,
    stdio: ['pipe', { file: logFile, append: true }, { file: logFile, append: true }, 'pipe'],
    buffer: false,
  });
  const events = child.stdio[3] as Readable | undefined;
  const reporter = new ProcessReporter(child as unknown as ResultPromise, events, python, logFile, footprint);
  const open = {
    type: 'open',
    tensorboard: setup.tensorboard
      ? { dir: setup.tensorboard.dir, purge_step: o.resume ? (o.purgeStep ?? null) : null }
      : null,
    wandb:
      setup.wandb && record.wandb
        ? {
            project: record.wandb.project,
            name: record.wandb.name,
            id: record.wandb.id,
            dir: setup.wandb.dir,
            config: o.config ?? {},
          }
        : null,
  };
  try {
    await reporter.start(open);
  } catch (error) {
    // a writer that could not start leaves nothing behind (its error says why; a crash's log is kept)
    await footprint.restore({ keepLog: reporter.logCited });
    throw error;
  }
  return reporter;
}

interface ReporterEvent {
  event: string;
  kind?: string;
  message?: string;
  wandb?: { id: string; mode: string; dir: string } | null;
}

class ProcessReporter implements Reporter {
  private failed: string | null = null;
  /** whether an error polar threw points at tracking.log (it is kept then) */
  logCited = false;
  private readonly events: ReporterEvent[] = [];
  private waiter: (() => void) | null = null;
  private readonly reading: Promise<void>;

  constructor(
    private readonly child: ResultPromise,
    events: Readable | undefined,
    private readonly python: string,
    private readonly logFile: string,
    private readonly footprint: Footprint,
  ) {
    this.reading = (async () => {
      if (!events) return;
      for await (const line of createInterface({
        input: events,
        crlfDelay: Number.POSITIVE_INFINITY,
      })) {
        if (!line.startsWith('{')) continue;
        try {
          this.events.push(JSON.parse(line) as ReporterEvent);
        } catch {
          continue;
        }
        this.waiter?.();
      }
      this.waiter?.();
    })();
    // a write to a writer that died (EPIPE) is reported by close(), not thrown at the run
    child.stdin?.on('error', () => {});
  }

  /** The open line, then the first event: ready, or why the writer could not start. */
  async start(open: Record<string, unknown>): Promise<void> {
    this.child.stdin?.write(`${JSON.stringify(open)}\n`);
    const first = await new Promise<ReporterEvent | null>((done) => {
      const check = () => {
        if (this.events.length > 0) done(this.events[0]!);
      };
      this.waiter = check;
      check();
      void this.reading.then(() => done(this.events[0] ?? null));
    });
    this.waiter = null;
    if (first?.event === 'ready') {
      if (first.wandb)
        log.info(
          `W&B run ${first.wandb.id} (${first.wandb.mode}${first.wandb.mode === 'offline' ? `: wandb sync ${first.wandb.dir} uploads it` : ''})`,
        );
      return;
    }
    this.child.stdin?.end();
    const result = await this.child;
    if (first?.kind === 'missing_package')
      throw new EnvironmentError(
        `--report-to: ${first.message} in ${this.python}`,
        installHint(this.python, [String((first as { package?: unknown }).package ?? 'tensorboard')]),
      );
    if (first?.kind === 'wandb')
      throw new PolarError(`--report-to wandb: ${first.message}`, {
        hint: 'log in with `wandb login` (or set WANDB_API_KEY), or write the run offline with WANDB_MODE=offline and upload it later with `wandb sync`',
      });
    const why = first?.message ?? `exit code ${result.exitCode ?? result.signal}`;
    this.logCited = true;
    throw new PolarError(`--report-to: the tracking writer (python -m polar_train.report) failed: ${why}`, {
      hint: `its log: ${this.logFile}`,
    });
  }

  log(axis: Axis, step: number, values: Record<string, number | null | undefined>): void {
    if (this.failed !== null) return;
    const kept: Record<string, number> = {};
    for (const [k, v] of Object.entries(values)) if (typeof v === 'number' && Number.isFinite(v)) kept[k] = v;
    if (Object.keys(kept).length === 0) return;
    if (this.child.exitCode !== null || this.child.stdin?.destroyed) {
      this.failed = 'the tracking writer exited';
      log.warn(`--report-to: ${this.failed}; the run goes on (its files hold every figure)`);
      return;
    }
    this.child.stdin?.write(`${JSON.stringify({ type: 'log', axis, step, values: kept })}\n`);
  }

  async close(): Promise<void> {
    this.child.stdin?.end();
    const result = await this.child;
    await this.reading;
    const error = this.events.find((e) => e.event === 'error');
    if (error || result.exitCode !== 0) {
      const why = error?.message ?? `exit code ${result.exitCode ?? result.signal}`;
      this.logCited = true;
      log.warn(`--report-to: the tracking writer failed: ${why} (its log: ${this.logFile})`);
    }
  }

  async discard(): Promise<void> {
    await this.close();
    await this.footprint.restore({ keepLog: this.logCited });
  }
}
