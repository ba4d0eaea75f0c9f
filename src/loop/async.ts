/**
 * The scheduler of `polar loop --max-staleness K` (K >= 1): rollouts for the next steps keep running
 * while a step builds, trains and publishes. Policy versions count published steps (version 0: the
 * starting policy; step N trains from version N-1 and publishes version N). A sample started under
 * version v may be trained by step N only while (N-1) - v <= K; a group of the step's batch is the
 * group of --group-size samples of one task, trained only when all its samples are in.
 *
 * - Launch: groups are launched in order; the k-th live group is meant for step floor(k / T) + 1 (T:
 *   --tasks-per-step) and may start once version (that step - 1 - K) is published. Its samples wait for
 *   one of the rollout slots (--concurrency), first come first served; each records the version current
 *   when its slot was given (the proxy records the version of every call, src/proxy/call.ts).
 * - Batch: step N trains the first T complete groups (in launch order) whose samples are all at most K
 *   versions old; a slow group meant for an earlier step is carried into a later one with its versions;
 *   a complete group too stale for step N is dropped and a fresh one launched for the same task.
 * - Journal: every decision is written ahead to run/schedule.jsonl (appended and flushed per record):
 *   groups launched, samples started with their version, groups complete, dropped, and each step's
 *   batch before it trains. --resume replays it: a group in a finished step's batch is never trained
 *   again, a journalled batch of an unfinished step is trained again as it was, unfinished groups run on
 *   (their graded samples kept), so nothing is lost or trained twice.
 *
 * The scheduler knows nothing of harnesses or trainers: a driver runs a group's samples and trains a
 * batch (src/loop/async-loop.ts for polar loop; bench/loop.ts drives the same code with a simulated
 * cluster). With K = 0 it would run the strict alternation; polar loop keeps its own code for K = 0.
 */
import { PolarError } from '../errors.ts';
import type { Journal, ScheduleRecord } from './journal.ts';

export { fileJournal, type Journal, readJournal, type ScheduleRecord } from './journal.ts';

export interface GroupPlan {
  group: number;
  task: string;
  /** the step it was launched for */
  meantFor: number;
}

/** A complete group as a batch sees it: the version each sample started under. */
export interface BatchGroup extends GroupPlan {
  versions: number[];
}

/** Per step, in step.json (`staleness`): over the batch's samples, staleness = (step - 1) - policy_version. */
export interface StalenessCounts {
  max: number;
  mean: number;
  /** samples of groups launched for an earlier step, trained by this one */
  carried: number;
  /** samples of groups dropped at this step as too stale */
  dropped: number;
}

export interface Batch {
  step: number;
  groups: BatchGroup[];
  staleness: StalenessCounts;
}

export interface SlotContext {
  /** runs one sample in a rollout slot; `version` is the policy version current when the slot was given */
  withSlot<T>(sample: number, run: (version: number) => Promise<T>): Promise<T>;
  signal: AbortSignal;
}

export interface AsyncDriver {
  /** the task of the k-th live group, meant for `step` */
  taskFor(step: number, index: number): string;
  /**
   * runs the group's samples that are not in yet (after a resume, some may be); each sample runs inside
   * `ctx.withSlot`. Resolves when every sample is in; an infrastructure failure of one sample is a
   * result of the group (the build leaves it out), an exception stops the loop.
   */
  runGroup(plan: GroupPlan, ctx: SlotContext): Promise<void>;
  /** builds, trains, publishes version `batch.step` (called one step at a time, in order) */
  train(batch: Batch): Promise<void>;
}

export interface SchedulerOptions {
  steps: number;
  tasksPerStep: number;
  groupSize: number;
  maxStaleness: number;
  slots: number;
  /** the version published now: the last finished step (0 at the start) */
  version: number;
  journal: Journal;
  /** the journal's records from an earlier attempt (--resume) */
  replay?: ScheduleRecord[];
  signal?: AbortSignal;
}

/**
 * Time accounting of a run (bench/loop.ts): busy milliseconds of the trainer and of all slots together,
 * and where the idle time went: the trainer waiting for a batch because a group the bound does not let
 * wait for a later step was still running (`trainWaitDueMs`) or because too few groups were complete
 * (`trainWaitFewMs`); free slot-milliseconds while the staleness bound held the next groups back
 * (`slotHeldMs`: every group it allows was launched and no sample was waiting for a slot).
 */
export interface SchedulerStats {
  wallMs: number;
  trainBusyMs: number;
  slotBusyMs: number;
  slots: number;
  trainWaitDueMs: number;
  trainWaitFewMs: number;
  slotHeldMs: number;
}

interface GroupState extends GroupPlan {
  /** start version per sample (from the journal on resume) */
  versions: Map<number, number>;
  complete: boolean;
  dropped: boolean;
  trained: boolean;
  running: boolean;
}

export class StalenessScheduler {
  private readonly o: SchedulerOptions;
  private readonly driver: AsyncDriver;
  private readonly groups = new Map<number, GroupState>();
  private version: number;
  private nextGroup = 0;
  private free: number;
  private readonly waiting: Array<() => void> = [];
  private readonly abort = new AbortController();
  private failure: unknown = null;
  private wake: (() => void) | null = null;
  private readonly running = new Set<Promise<void>>();
  /** batches journalled for steps not yet finished (resume: trained again as they were) */
  private readonly journalled = new Map<number, number[]>();
  readonly stats: SchedulerStats;

  constructor(options: SchedulerOptions, driver: AsyncDriver) {
    if (options.maxStaleness < 0 || !Number.isInteger(options.maxStaleness))
      throw new PolarError(`--max-staleness must be a whole number >= 0, not ${options.maxStaleness}`);
    this.o = options;
    this.driver = driver;
    this.version = options.version;
    this.free = options.slots;
    this.stats = {
      wallMs: 0,
      trainBusyMs: 0,
      slotBusyMs: 0,
      slots: options.slots,
      trainWaitDueMs: 0,
      trainWaitFewMs: 0,
      slotHeldMs: 0,
    };
    if (options.signal) {
      if (options.signal.aborted) this.abort.abort(options.signal.reason);
      else
        options.signal.addEventListener('abort', () => this.abort.abort(options.signal!.reason), {
          once: true,
        });
    }
    this.replay(options.replay ?? []);
  }

  /** The state an earlier attempt left: groups, sample versions, drops, and the batches of finished steps. */
  private replay(records: ScheduleRecord[]): void {
    for (const r of records) {
      if (r.type === 'group') {
        this.groups.set(r.group, {
          group: r.group,
          task: r.task,
          meantFor: r.meant_for,
          versions: new Map(),
          complete: false,
          dropped: false,
          trained: false,
          running: false,
        });
        this.nextGroup = Math.max(this.nextGroup, r.group + 1);
        continue;
      }
      if (r.type === 'batch') {
        if (r.step <= this.version) for (const g of r.groups) this.known(g, r).trained = true;
        else this.journalled.set(r.step, r.groups);
        continue;
      }
      const g = this.known(r.group, r);
      if (r.type === 'sample') g.versions.set(r.sample, r.policy_version);
      else if (r.type === 'complete') g.complete = true;
      else if (r.type === 'dropped') g.dropped = true;
    }
  }

  private known(group: number, r: ScheduleRecord): GroupState {
    const g = this.groups.get(group);
    if (!g)
      throw new PolarError(
        `the schedule journal names group ${group} before launching it (${JSON.stringify(r)})`,
        {
          hint: 'move the run aside or start another --out',
        },
      );
    return g;
  }

  /** groups launched and not dropped */
  private live(): number {
    let n = 0;
    for (const g of this.groups.values()) if (!g.dropped) n++;
    return n;
  }

  private fail(error: unknown): void {
    if (this.failure === null) this.failure = error;
    this.abort.abort(error);
    this.poke();
  }

  private poke(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  /** Adds the free slot time since the last change of `free` while more groups remain than are launched. */
  private markSlots(): void {
    const now = performance.now();
    if (this.live() < this.o.steps * this.o.tasksPerStep)
      this.stats.slotHeldMs += this.free * (now - this.slotMark);
    this.slotMark = now;
  }

  private slotMark = performance.now();

  private async acquire(): Promise<void> {
    this.markSlots();
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    this.markSlots();
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }

  private start(g: GroupState): void {
    g.running = true;
    const ctx: SlotContext = {
      signal: this.abort.signal,
      withSlot: async (sample, run) => {
        await this.acquire();
        const t0 = performance.now();
        try {
          if (this.abort.signal.aborted) throw this.abort.signal.reason;
          const version = this.version;
          g.versions.set(sample, version);
          await this.o.journal.append({
            v: 1,
            type: 'sample',
            group: g.group,
            sample,
            policy_version: version,
          });
          return await run(version);
        } finally {
          this.stats.slotBusyMs += performance.now() - t0;
          this.release();
        }
      },
    };
    const p = this.driver
      .runGroup({ group: g.group, task: g.task, meantFor: g.meantFor }, ctx)
      .then(async () => {
        if (this.abort.signal.aborted) return;
        if (g.versions.size < this.o.groupSize)
          throw new PolarError(
            `group ${g.group} (${g.task}) ended with ${g.versions.size} of ${this.o.groupSize} samples started`,
          );
        await this.o.journal.append({ v: 1, type: 'complete', group: g.group });
        g.complete = true;
        g.running = false;
        this.poke();
      })
      .catch((error) => this.fail(error))
      .finally(() => this.running.delete(p));
    this.running.add(p);
  }

  /** Launches every group the staleness bound allows now (and resumes unfinished ones). */
  private async pump(): Promise<void> {
    this.markSlots();
    for (const g of this.groups.values())
      if (!g.complete && !g.dropped && !g.running && !this.abort.signal.aborted) this.start(g);
    const T = this.o.tasksPerStep;
    for (;;) {
      if (this.abort.signal.aborted) return;
      const live = this.live();
      if (live >= this.o.steps * T) return;
      const meantFor = Math.floor(live / T) + 1;
      if (meantFor - 1 - this.o.maxStaleness > this.version) return;
      const g: GroupState = {
        group: this.nextGroup++,
        task: this.driver.taskFor(meantFor, live % T),
        meantFor,
        versions: new Map(),
        complete: false,
        dropped: false,
        trained: false,
        running: false,
      };
      this.groups.set(g.group, g);
      await this.o.journal.append({ v: 1, type: 'group', group: g.group, task: g.task, meant_for: meantFor });
      this.start(g);
    }
  }

  /**
   * The batch of `step`, or null while it must wait. A group with a sample that would be too stale for
   * the next step is due now: the step waits for it (oldest first, at most T); the rest of the batch is
   * the earliest complete groups. A complete group already too stale (more than T were due at once, or
   * a resume rolled its version back) is dropped and a fresh one launched in its place.
   */
  private async pick(step: number): Promise<Batch | null> {
    const K = this.o.maxStaleness;
    const T = this.o.tasksPerStep;
    const trainer = step - 1;
    const again = this.journalled.get(step);
    let chosen: GroupState[];
    if (again) chosen = again.map((id) => this.groups.get(id)!);
    else {
      const open = [...this.groups.values()]
        .filter((g) => !g.dropped && !g.trained)
        .sort((a, b) => a.group - b.group);
      let dropped = 0;
      for (const g of open) {
        if (!g.complete || trainer - Math.min(...g.versions.values()) <= K) continue;
        g.dropped = true;
        dropped += g.versions.size;
        await this.o.journal.append({ v: 1, type: 'dropped', group: g.group, step });
      }
      if (dropped > 0) {
        this.droppedAt.set(step, (this.droppedAt.get(step) ?? 0) + dropped);
        await this.pump(); // fresh groups in place of the dropped ones
      }
      const fresh = open.filter((g) => !g.dropped);
      const due = fresh.filter((g) => [...g.versions.values()].some((v) => v <= trainer - K)).slice(0, T);
      this.waitingOnDue = due.some((g) => !g.complete);
      if (this.waitingOnDue) return null;
      chosen = [...due];
      for (const g of fresh) {
        if (chosen.length === T) break;
        if (g.complete && !chosen.includes(g)) chosen.push(g);
      }
      if (chosen.length < T) return null;
      chosen.sort((a, b) => a.group - b.group);
    }
    if (!again)
      await this.o.journal.append({ v: 1, type: 'batch', step, groups: chosen.map((g) => g.group) });
    const staleness: number[] = [];
    let carried = 0;
    for (const g of chosen) {
      for (const v of g.versions.values()) staleness.push(trainer - v);
      if (g.meantFor < step) carried += g.versions.size;
    }
    return {
      step,
      groups: chosen.map((g) => ({
        group: g.group,
        task: g.task,
        meantFor: g.meantFor,
        versions: [...g.versions.entries()].sort((a, b) => a[0] - b[0]).map(([, v]) => v),
      })),
      staleness: {
        max: Math.max(0, ...staleness),
        mean: staleness.length ? staleness.reduce((a, b) => a + b, 0) / staleness.length : 0,
        carried,
        dropped: this.droppedAt.get(step) ?? 0,
      },
    };
  }

  private readonly droppedAt = new Map<number, number>();
  /** the last pick waited for a due group (stats) */
  private waitingOnDue = false;

  /**
   * After a crash between a publish and its step.json, samples may name a version that --resume rolled
   * back (it trains that step again, to other weights): their groups are dropped, never trained.
   */
  private async rollBack(): Promise<void> {
    for (const g of this.groups.values()) {
      if (g.dropped || g.trained) continue;
      if (![...g.versions.values()].some((v) => v > this.version)) continue;
      g.dropped = true;
      const step = this.version + 1;
      this.droppedAt.set(step, (this.droppedAt.get(step) ?? 0) + g.versions.size);
      await this.o.journal.append({ v: 1, type: 'dropped', group: g.group, step });
    }
  }

  /** Runs steps version+1 .. steps; resolves when the last is trained, rejects on the first failure. */
  async run(): Promise<void> {
    const t0 = performance.now();
    try {
      await this.rollBack();
      await this.pump();
      for (let step = this.version + 1; step <= this.o.steps; step++) {
        let batch: Batch | null = null;
        for (;;) {
          if (this.failure !== null) throw this.failure;
          if (this.abort.signal.aborted) throw this.abort.signal.reason;
          const woken = new Promise<void>((resolve) => {
            this.wake = resolve;
          });
          batch = await this.pick(step);
          if (batch) break;
          const w0 = performance.now();
          await woken;
          if (this.waitingOnDue) this.stats.trainWaitDueMs += performance.now() - w0;
          else this.stats.trainWaitFewMs += performance.now() - w0;
        }
        const tt = performance.now();
        for (const g of batch.groups) this.groups.get(g.group)!.trained = true;
        await this.driver.train(batch);
        this.stats.trainBusyMs += performance.now() - tt;
        this.version = step;
        await this.pump();
      }
    } catch (error) {
      this.fail(error);
      throw error;
    } finally {
      this.abort.abort(new PolarError('the loop stopped'));
      await Promise.allSettled([...this.running]);
      this.stats.wallMs = performance.now() - t0;
    }
  }
}
