/**
 * The scheduler of `polar loop --max-staleness K` (K >= 1): rollouts for the next steps keep running
 * while a step builds, trains and publishes. Policy versions count published steps (version 0: the
 * starting policy; step N trains from version N-1 and publishes version N). A sample started under
 * version v may be trained by step N only while (N-1) - v <= K; a group of the step's batch is the
 * group of --group-size samples of one task, trained only when all its samples are in.
 *
 * - Launch: groups are launched in order; the k-th live group is meant for step floor(k / T) + 1 (T:
 *   --tasks-per-step) and may start once version (that step - 1 - K) is published, i.e. while fewer than
 *   (version + K + 1) x T groups are live; --oversample E lets E more run (slime's over-sampling: more
 *   groups than the steps may train, the first complete ones trained, the rest dropped when stale or
 *   overdue, slime/rollout/sglang_rollout.py generate_rollout_async at THUDM/slime 0044b40). Its samples wait for
 *   one of the rollout slots (--concurrency), first come first served; each records the version current
 *   when its slot was given (the proxy records the version of every call, src/proxy/call.ts).
 * - Batch: step N trains the first T complete groups (in launch order) whose samples are all at most K
 *   versions old; a slow group meant for an earlier step is carried into a later one with its versions;
 *   a complete group too stale for step N is dropped and a fresh one launched in its place.
 * - Overdue groups (--overdue): a group still running with a sample that step N+1 could not train is
 *   due at step N. wait (the default): step N waits for it, and meanwhile no version is published, so no
 *   group launches and slots idle; every task's samples are trained however long they take. drop: step
 *   N trains the first T complete groups (due ones first) and does not wait; the due groups still running
 *   are cancelled (SlotContext.cancel: the driver ends their samples, nothing of them is trained) and
 *   their tasks launched again, as are those of complete groups dropped as too stale. A task slower than
 *   the bound allows is then never trained: drop is biased against long tasks, wait is not.
 * - Journal: every decision is written ahead to run/schedule.jsonl (appended and flushed per record):
 *   groups launched, samples started with their version, groups complete, dropped (with its reason; an
 *   overdue group's record is written before its samples are cancelled; a relaunch names the group it
 *   replaces, which runs the same task), and each
 *   step's batch before it trains. --resume replays it: a group in a finished step's batch is never trained
 *   again, a journalled batch of an unfinished step is trained again as it was, unfinished groups run on
 *   (their graded samples kept), so nothing is lost or trained twice.
 *
 * The scheduler knows nothing of harnesses or trainers: a driver runs a group's samples and trains a
 * batch (src/loop/async-loop.ts for polar loop; bench/loop.ts drives the same code with a simulated
 * cluster). With K = 0 it would run the strict alternation; polar loop keeps its own code for K = 0.
 */
import { PolarError } from '../errors.ts';
import type { DropReason, ScheduleRecord } from './journal.ts';
import type {
  AsyncDriver,
  Batch,
  GroupPlan,
  SchedulerOptions,
  SchedulerStats,
  SlotContext,
} from './schedule-types.ts';

export { fileJournal, type Journal, readJournal, type ScheduleRecord } from './journal.ts';
export type * from './schedule-types.ts';

interface GroupState extends GroupPlan {
  /** start version per sample (from the journal on resume) */
  versions: Map<number, number>;
  complete: boolean;
  dropped: boolean;
  trained: boolean;
  running: boolean;
  /** aborted to cancel the group's samples (--overdue drop) */
  cancel: AbortController;
  /** slot time of its samples that ended before it was dropped (stats) */
  busyMs: number;
}

/** A group not yet started, as launched or as the journal names it. */
const newGroup = (plan: GroupPlan): GroupState => ({
  ...plan,
  versions: new Map(),
  complete: false,
  dropped: false,
  trained: false,
  running: false,
  cancel: new AbortController(),
  busyMs: 0,
});

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
  /** --overdue drop: dropped groups whose task is launched again, oldest first */
  private readonly relaunch: GroupState[] = [];
  private readonly drop: boolean;
  /** milliseconds for the stats (SchedulerOptions.clock) */
  private readonly now: () => number;
  readonly stats: SchedulerStats;

  constructor(options: SchedulerOptions, driver: AsyncDriver) {
    if (options.maxStaleness < 0 || !Number.isInteger(options.maxStaleness))
      throw new PolarError(`--max-staleness must be a whole number >= 0, not ${options.maxStaleness}`);
    this.o = options;
    this.now = options.clock ?? (() => performance.now());
    this.slotMark = this.now();
    this.drop = options.overdue === 'drop';
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
      slotWastedMs: 0,
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
        this.groups.set(r.group, newGroup({ group: r.group, task: r.task, meantFor: r.meant_for }));
        this.nextGroup = Math.max(this.nextGroup, r.group + 1);
        const replaced = r.replaces === undefined ? -1 : this.relaunch.indexOf(this.known(r.replaces, r));
        if (replaced >= 0) this.relaunch.splice(replaced, 1);
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
      else if (r.type === 'dropped') {
        g.dropped = true;
        // its task runs again, unless a journalled group replaced it (a record without a reason: an earlier
        // polar's journal, whose relaunch took the schedule's next task)
        if (r.reason) this.relaunch.push(g);
      }
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
    const now = this.now();
    if (this.live() < this.o.steps * this.o.tasksPerStep)
      this.stats.slotHeldMs += this.free * (now - this.slotMark);
    this.slotMark = now;
  }

  private slotMark: number;

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
    const cancel = g.cancel.signal;
    const ctx: SlotContext = {
      signal: this.abort.signal,
      cancel,
      withSlot: async (sample, run) => {
        await this.acquire();
        const t0 = this.now();
        try {
          if (this.abort.signal.aborted) throw this.abort.signal.reason;
          if (cancel.aborted) throw cancel.reason;
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
          const ms = this.now() - t0;
          this.stats.slotBusyMs += ms;
          if (g.dropped) this.stats.slotWastedMs += ms;
          else g.busyMs += ms;
          this.release();
        }
      },
    };
    const p = this.driver
      .runGroup({ group: g.group, task: g.task, meantFor: g.meantFor }, ctx)
      .then(async () => {
        if (this.abort.signal.aborted || g.dropped) return;
        if (g.versions.size < this.o.groupSize)
          throw new PolarError(
            `group ${g.group} (${g.task}) ended with ${g.versions.size} of ${this.o.groupSize} samples started`,
          );
        await this.o.journal.append({ v: 1, type: 'complete', group: g.group });
        g.complete = true;
        g.running = false;
        this.poke();
      })
      // a group cancelled as overdue ends as its driver ends it: no result of the loop's
      .catch((error) => (g.dropped ? undefined : this.fail(error)))
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
      const window = (this.version + this.o.maxStaleness + 1) * T;
      if (live >= window + (this.o.oversample ?? 0)) return;
      // --overdue drop: a dropped group's task first, so no task of the schedule is lost or doubled
      const replaces = this.relaunch.shift();
      const task = replaces?.task ?? this.driver.taskFor(meantFor, live % T);
      const g = newGroup({ group: this.nextGroup++, task, meantFor });
      this.groups.set(g.group, g);
      await this.o.journal.append({
        v: 1,
        type: 'group',
        group: g.group,
        task,
        meant_for: meantFor,
        ...(replaces ? { replaces: replaces.group } : {}),
      });
      this.start(g);
    }
  }

  /**
   * The batch of `step`, or null while it must wait. A group with a sample that would be too stale for
   * the next step is due now: the step waits for it (oldest first, at most T; --overdue drop: the
   * complete ones only); the rest of the batch is the earliest complete groups. A complete group already
   * too stale (more than T were due at once, or a resume rolled its version back) is dropped and a fresh
   * one launched in its place; under --overdue drop, so are the due groups the batch leaves running.
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
        dropped++;
        await this.dropGroup(g, step, 'stale');
      }
      if (dropped > 0) await this.pump(); // fresh groups in place of the dropped ones
      const fresh = open.filter((g) => !g.dropped);
      const isDue = (g: GroupState) => [...g.versions.values()].some((v) => v <= trainer - K);
      // wait: the due groups, complete or not (the step waits for them); drop: the complete ones only
      const due = fresh.filter((g) => isDue(g) && (g.complete || !this.drop)).slice(0, T);
      this.waitingOnDue = due.some((g) => !g.complete);
      if (this.waitingOnDue) return null;
      chosen = [...due];
      for (const g of fresh) {
        if (chosen.length === T) break;
        if (g.complete && !chosen.includes(g)) chosen.push(g);
      }
      if (chosen.length < T) return null;
      chosen.sort((a, b) => a.group - b.group);
      if (this.drop) {
        // the running groups this batch leaves behind, which no later step may train: cancelled, and
        // their tasks launched afresh
        const overdue = fresh.filter((g) => !g.complete && isDue(g));
        for (const g of overdue) await this.dropGroup(g, step, 'overdue');
        if (overdue.length) await this.pump();
      }
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
      await this.dropGroup(g, this.version + 1, 'rolled_back');
    }
  }

  /**
   * Drops a group at `step`, journalled: its samples counted in the step's `dropped`, their slot time
   * wasted, its task launched again (first, by the next pump); an overdue group's running samples are
   * cancelled once the record is written.
   */
  private async dropGroup(g: GroupState, step: number, reason: DropReason): Promise<void> {
    g.dropped = true;
    this.droppedAt.set(step, (this.droppedAt.get(step) ?? 0) + g.versions.size);
    this.stats.slotWastedMs += g.busyMs;
    await this.o.journal.append({
      v: 1,
      type: 'dropped',
      group: g.group,
      step,
      reason,
    });
    this.relaunch.push(g);
    if (reason === 'overdue')
      g.cancel.abort(
        new PolarError(
          `group ${g.group} (${g.task}) cancelled: step ${step} trained without it (--overdue drop)`,
        ),
      );
  }

  /** Runs steps version+1 .. steps; resolves when the last is trained, rejects on the first failure. */
  async run(): Promise<void> {
    const t0 = this.now();
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
          const w0 = this.now();
          await woken;
          if (this.waitingOnDue) this.stats.trainWaitDueMs += this.now() - w0;
          else this.stats.trainWaitFewMs += this.now() - w0;
        }
        const tt = this.now();
        for (const g of batch.groups) this.groups.get(g.group)!.trained = true;
        await this.driver.train(batch);
        this.stats.trainBusyMs += this.now() - tt;
        this.version = step;
        await this.pump();
      }
    } catch (error) {
      this.fail(error);
      throw error;
    } finally {
      this.abort.abort(new PolarError('the loop stopped'));
      await Promise.allSettled([...this.running]);
      this.stats.wallMs = this.now() - t0;
    }
  }
}
