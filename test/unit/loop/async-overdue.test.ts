/**
 * `polar loop --overdue wait|drop` in the staleness scheduler (src/loop/async.ts), driven by a stand-in
 * driver whose samples end only when the test lets them (a promise per sample: the order of events is
 * the test's, no clock). The scenario (K = 1, 2 tasks a step, 2 samples a group, 3 steps): group 0 is
 * slow, so step 1 trains groups 1 and 2, and at step 2 group 0 (version 0) is due. Checks: under drop
 * the trainer does not wait for it: step 2 trains the complete groups, group 0's running samples are
 * cancelled through the group's signal, the drop is journalled ahead with its reason and counted, and
 * group 0's task is launched again and trained once; under wait step 2 waits for group 0, and the
 * schedule and journal are those of a run without the option; a crash just after an overdue drop
 * resumes from the journal with nothing lost, nothing trained twice and the dropped group never trained.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { PolarError } from '../../../src/errors.ts';
import {
  type AsyncDriver,
  type Batch,
  fileJournal,
  type Journal,
  readJournal,
  type ScheduleRecord,
  StalenessScheduler,
} from '../../../src/loop/async.ts';
import { checkBound, memoryJournal, turns } from '../../support/staleness.ts';
import { tempDir } from '../../support/temp.ts';

/**
 * Lets the event loop run until `cond` holds (a file journal's writes take real time: after some turns it
 * sleeps a little between looks); fails, never hangs, if it does not within a generous bound.
 */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 12_000; i++) {
    if (cond()) return;
    await new Promise((r) => (i < 500 ? setImmediate(r) : setTimeout(r, 5)));
  }
  assert.fail(`never happened: ${what}`);
}

/** A driver whose samples end when `finish(group)` (or `auto`) lets them, and whose training ends at once. */
function gated() {
  const gates = new Map<number, () => void>();
  const finished = new Set<number>();
  const started = new Map<number, number>();
  const aborted = new Map<number, number>();
  const runs = new Map<number, number>();
  const batches: Batch[] = [];
  const state = { auto: false };
  const bump = (m: Map<number, number>, g: number) => m.set(g, (m.get(g) ?? 0) + 1);
  const driver: AsyncDriver = {
    taskFor: (step, index) => `t${step}-${index}`,
    async runGroup(plan, ctx) {
      bump(runs, plan.group);
      const released = new Promise<void>((resolve) => {
        if (state.auto || finished.has(plan.group)) resolve();
        else gates.set(plan.group, resolve);
      });
      await Promise.all(
        [0, 1].map((sample) =>
          ctx.withSlot(sample, async () => {
            bump(started, plan.group);
            await new Promise<void>((resolve, reject) => {
              const stop = (signal: AbortSignal) => () => {
                if (signal === ctx.cancel) bump(aborted, plan.group);
                reject(signal.reason);
              };
              ctx.cancel.addEventListener('abort', stop(ctx.cancel), { once: true });
              ctx.signal.addEventListener('abort', stop(ctx.signal), { once: true });
              released.then(resolve);
            });
          }),
        ),
      );
    },
    async train(batch) {
      batches.push(batch);
    },
  };
  return {
    driver,
    batches,
    started,
    aborted,
    runs,
    finish(...groups: number[]) {
      for (const g of groups) {
        finished.add(g);
        gates.get(g)?.();
      }
    },
    /** every sample from now on ends as soon as it starts */
    finishAll() {
      state.auto = true;
      for (const open of gates.values()) open();
    },
  };
}

const options = { steps: 3, tasksPerStep: 2, groupSize: 2, slots: 8, version: 0, maxStaleness: 1 };
const ids = (b: Batch) => b.groups.map((g) => g.group);
const ALL_TASKS = ['t1-0', 't1-1', 't2-0', 't2-1', 't3-0', 't3-1'];

/** Up to step 2's decision: groups 0-3 run under version 0, 1 and 2 end, step 1 trains them, 3 and 4 end. */
async function toStepTwo(run: ReturnType<typeof gated>) {
  await until(() => [0, 1, 2, 3].every((g) => run.started.get(g) === 2), 'groups 0-3 started');
  run.finish(1, 2);
  await until(() => run.batches.length === 1, 'step 1 trained');
  assert.deepEqual(ids(run.batches[0]!), [1, 2]);
  await until(() => run.started.get(4) === 2, 'group 4 started under version 1');
  run.finish(3, 4);
}

describe('--overdue', () => {
  test('drop: the trainer does not wait for an overdue group; it is cancelled and its task launched again', async () => {
    const run = gated();
    const journal = memoryJournal();
    const s = new StalenessScheduler({ ...options, overdue: 'drop', journal }, run.driver);
    const done = s.run();
    await toStepTwo(run);
    // group 0 never ends by itself: step 2 trains without it
    await until(() => run.batches.length === 2, 'step 2 trained without waiting for group 0');
    assert.deepEqual(ids(run.batches[1]!), [3, 4]);
    assert.equal(run.aborted.get(0), 2, "both of group 0's running samples were cancelled");
    assert.equal(run.batches[1]!.staleness.dropped, 2, "group 0's two samples counted as dropped");
    // written ahead: the drop, then the replacement, then the batch
    const at = (pred: (r: ScheduleRecord) => boolean) => journal.records.findIndex(pred);
    const drop = at((r) => r.type === 'dropped' && r.group === 0);
    assert.deepEqual(journal.records[drop], { v: 1, type: 'dropped', group: 0, step: 2, reason: 'overdue' });
    const replacement = journal.records.find((r) => r.type === 'group' && r.replaces === 0);
    assert.ok(replacement && replacement.type === 'group');
    assert.equal(replacement.task, 't1-0', "group 0's task");
    assert.ok(drop < journal.records.indexOf(replacement));
    assert.ok(journal.records.indexOf(replacement) < at((r) => r.type === 'batch' && r.step === 2));
    run.finishAll();
    await done;
    assert.equal(run.batches.length, 3);
    checkBound(run.batches, 1);
    const trained = run.batches.flatMap((b) => b.groups);
    assert.ok(!trained.some((g) => g.group === 0), 'the cancelled group is never trained');
    assert.ok(trained.some((g) => g.group === replacement.group));
    assert.deepEqual(trained.map((g) => g.task).sort(), ALL_TASKS, 'every task trained once');
    // the slot time of the cancelled samples is counted as wasted, within the busy time
    assert.ok(s.stats.slotWastedMs > 0 && s.stats.slotWastedMs <= s.stats.slotBusyMs);
  });

  test('--oversample: groups beyond the window run; the first complete train, the stale ones go again', async () => {
    const run = gated();
    const journal = memoryJournal();
    const has = (type: string, group: number) =>
      journal.records.some((r) => r.type === type && 'group' in r && r.group === group);
    // step 1's training lasts until the test lets it end
    let endStep1 = () => {};
    const step1 = new Promise<void>((resolve) => {
      endStep1 = resolve;
    });
    const driver: AsyncDriver = {
      ...run.driver,
      async train(batch) {
        await run.driver.train(batch);
        if (batch.step === 1) await step1;
      },
    };
    const s = new StalenessScheduler(
      { ...options, slots: 12, overdue: 'drop', oversample: 2, journal },
      driver,
    );
    const done = s.run();
    // the window holds (K + 1) x 2 = 4 groups; 2 more run: every task of the 3 steps starts under version 0
    await until(() => [0, 1, 2, 3, 4, 5].every((g) => run.started.get(g) === 2), 'groups 0-5 started');
    // the first complete groups train, whatever step they were launched for
    run.finish(1, 4);
    await until(() => run.batches.length === 1, 'step 1 training');
    assert.deepEqual(ids(run.batches[0]!), [1, 4]);
    // three groups end while step 1 trains: step 2 takes two; group 0, still running, is cancelled
    run.finish(2, 3, 5);
    await until(() => [2, 3, 5].every((g) => has('complete', g)), 'groups 2, 3 and 5 complete');
    endStep1();
    await until(() => run.batches.length === 2, 'step 2 trained');
    assert.deepEqual(ids(run.batches[1]!), [2, 3]);
    assert.equal(run.aborted.get(0), 2);
    // group 5 (version 0) is 2 versions old at step 3: dropped as stale, its task launched again
    run.finishAll();
    await done;
    assert.equal(run.batches.length, 3);
    checkBound(run.batches, 1);
    const dropped = journal.records.flatMap((r) =>
      r.type === 'dropped' ? [[r.group, r.step, r.reason]] : [],
    );
    assert.deepEqual(dropped, [
      [0, 2, 'overdue'],
      [5, 3, 'stale'],
    ]);
    const trained = run.batches.flatMap((b) => b.groups);
    assert.deepEqual(trained.map((g) => g.task).sort(), ALL_TASKS, 'every task trained once');
    assert.deepEqual(
      run.batches[2]!.groups.map((g) => [g.task, g.versions]),
      [
        ['t1-0', [1, 1]],
        ['t3-1', [2, 2]],
      ],
    );
    assert.deepEqual(
      run.batches.map((b) => b.staleness.dropped),
      [0, 2, 2],
    );
    assert.ok(s.stats.slotWastedMs > 0 && s.stats.slotWastedMs <= s.stats.slotBusyMs);
  });

  test('wait: step 2 waits for the overdue group, and runs as without the option', async () => {
    const schedules: Array<{ batches: number[][]; records: ScheduleRecord[] }> = [];
    for (const overdue of ['wait', undefined] as const) {
      const run = gated();
      const journal = memoryJournal();
      const s = new StalenessScheduler({ ...options, ...(overdue ? { overdue } : {}), journal }, run.driver);
      const done = s.run();
      await toStepTwo(run);
      await turns(200);
      assert.equal(run.batches.length, 1, 'step 2 waits for group 0');
      assert.equal(run.aborted.get(0), undefined, 'nothing cancelled');
      run.finish(0);
      await until(() => run.batches.length === 2, 'step 2 trained');
      assert.deepEqual(ids(run.batches[1]!), [0, 3], 'group 0 carried into step 2');
      run.finishAll();
      await done;
      checkBound(run.batches, 1);
      assert.ok(!journal.records.some((r) => 'reason' in r || 'replaces' in r));
      schedules.push({ batches: run.batches.map(ids), records: journal.records });
    }
    assert.deepEqual(schedules[0], schedules[1], 'wait is the schedule without the option');
  });

  test('a crash just after an overdue drop resumes from the journal: nothing lost or trained twice', async () => {
    const dir = tempDir('polar-overdue-');
    const path = join(dir, 'schedule.jsonl');
    const file = fileJournal(path);
    // the process dies as it journals the replacement of the dropped group
    const crashing: Journal = {
      async append(r) {
        if (r.type === 'group' && r.replaces !== undefined) throw new PolarError('simulated crash');
        await file.append(r);
      },
    };
    const first = gated();
    const s1 = new StalenessScheduler({ ...options, overdue: 'drop', journal: crashing }, first.driver);
    const crashed = s1.run();
    await toStepTwo(first);
    await assert.rejects(crashed, /simulated crash/);
    assert.equal(first.batches.length, 1, 'step 2 was not trained');

    const replay = await readJournal(path);
    assert.ok(replay.some((r) => r.type === 'dropped' && r.group === 0 && r.reason === 'overdue'));
    const second = gated();
    second.finishAll();
    const journal = fileJournal(path);
    const s2 = new StalenessScheduler(
      { ...options, version: 1, overdue: 'drop', journal, replay },
      second.driver,
    );
    await s2.run();
    assert.deepEqual(
      second.batches.map((b) => b.step),
      [2, 3],
    );
    const batches = [...first.batches, ...second.batches];
    checkBound(batches, 1);
    const trained = batches.flatMap((b) => b.groups);
    assert.ok(!trained.some((g) => g.group === 0), 'the dropped group is never trained');
    assert.equal(second.runs.get(0), undefined, 'nor run again');
    assert.deepEqual(trained.map((g) => g.task).sort(), ALL_TASKS, 'every task trained once');
    for (const g of [3, 4]) assert.equal(second.runs.get(g), undefined, `complete group ${g} not run again`);
    const all = await readJournal(path);
    assert.equal(all.filter((r) => r.type === 'group' && r.replaces === 0).length, 1, 'replaced once');
  });
});
