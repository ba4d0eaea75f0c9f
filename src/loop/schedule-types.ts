/**
 * The types of the staleness scheduler (src/loop/async.ts): what a driver is given and gives back (a group
 * to run, its rollout slots, a step's batch with its staleness counts), the scheduler's options and the
 * time accounting bench/loop.ts prints.
 */
import type { OverduePolicy } from '../options/defaults.ts';
import type { Journal, ScheduleRecord } from './journal.ts';

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
  /**
   * runs one sample in a rollout slot; `version` is the policy version current when the slot was given.
   * Once `cancel` is aborted it rejects with its reason without running the sample.
   */
  withSlot<T>(sample: number, run: (version: number) => Promise<T>): Promise<T>;
  /** the loop's: aborted when the loop stops (an interrupt, a failure, the last step trained) */
  signal: AbortSignal;
  /**
   * this group's alone: aborted when the scheduler cancels it as overdue (--overdue drop). The driver ends
   * its running samples (their processes, not the other groups'), records no result for them, and
   * resolves or rejects: the scheduler ignores how a cancelled group ends.
   */
  cancel: AbortSignal;
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
  /** --overdue: what a step does about a running group the bound cannot carry (absent: wait) */
  overdue?: OverduePolicy;
  /**
   * --oversample: groups launched beyond the bound's window ((K + 1) x tasksPerStep groups past the
   * trained ones); absent: 0
   */
  oversample?: number;
  /** the journal's records from an earlier attempt (--resume) */
  replay?: ScheduleRecord[];
  signal?: AbortSignal;
  /** milliseconds for the stats alone (default performance.now; bench/loop.ts runs a virtual clock) */
  clock?: () => number;
}

/**
 * Time accounting of a run (bench/loop.ts): busy milliseconds of the trainer and of all slots together,
 * and where the idle time went: the trainer waiting for a batch because a group the bound does not let
 * wait for a later step was still running (`trainWaitDueMs`) or because too few groups were complete
 * (`trainWaitFewMs`); free slot-milliseconds while the staleness bound held the next groups back
 * (`slotHeldMs`: every group it allows was launched and no sample was waiting for a slot). Slot time
 * spent on samples of groups that were then dropped (too stale, overdue, rolled back) is busy but of no
 * use to training: `slotWastedMs`, a part of `slotBusyMs`.
 */
export interface SchedulerStats {
  wallMs: number;
  trainBusyMs: number;
  slotBusyMs: number;
  slots: number;
  trainWaitDueMs: number;
  trainWaitFewMs: number;
  slotHeldMs: number;
  slotWastedMs: number;
}
