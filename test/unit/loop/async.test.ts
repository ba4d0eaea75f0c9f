/**
 * The staleness scheduler of `polar loop --max-staleness K` (src/loop/async.ts), driven by a stand-in
 * driver whose samples and trainer steps take a given number of event-loop turns (no clock: the order of
 * events is the same on every run). Checks: K = 0 alternates strictly; K = 1 runs the next step's
 * rollouts while a step trains and carries a slow group into a later step with its version; no sample is
 * ever trained more than K versions late; a group too stale is dropped and replaced; every launched group
 * is trained at most once; the journal written ahead lets a new scheduler finish a run that crashed
 * mid-step without losing or retraining anything; a cut last journal line is ignored, a bad one refused;
 * the run's time accounting (busy, waiting, held back) stays within its wall time.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { PolarError } from '../../../src/errors.ts';
import {
  type AsyncDriver,
  type Batch,
  fileJournal,
  readJournal,
  StalenessScheduler,
} from '../../../src/loop/async.ts';
import { checkBound, memoryJournal, turns } from '../../support/staleness.ts';
import { tempDir } from '../../support/temp.ts';

interface Event {
  kind: 'launch' | 'sample' | 'sample-end' | 'train-start' | 'train-end';
  group?: number;
  step?: number;
  version?: number;
}

/** A driver whose group g's samples take `cost(g)` turns each, and a trainer step `trainTurns`. */
function standIn(opts: {
  tasks: string[];
  cost: (group: number) => number;
  trainTurns: number;
  crashAtStep?: number;
  runs?: Map<number, number>;
}): AsyncDriver & { events: Event[]; batches: Batch[] } {
  const events: Event[] = [];
  const batches: Batch[] = [];
  return {
    events,
    batches,
    taskFor: (_step, index) => opts.tasks[index % opts.tasks.length]!,
    async runGroup(plan, ctx) {
      events.push({ kind: 'launch', group: plan.group, step: plan.meantFor });
      opts.runs?.set(plan.group, (opts.runs.get(plan.group) ?? 0) + 1);
      await Promise.all(
        [0, 1].map((sample) =>
          ctx.withSlot(sample, async (version) => {
            events.push({ kind: 'sample', group: plan.group, version });
            await turns(opts.cost(plan.group));
            events.push({ kind: 'sample-end', group: plan.group });
          }),
        ),
      );
    },
    async train(batch) {
      events.push({ kind: 'train-start', step: batch.step });
      batches.push(batch);
      await turns(opts.trainTurns);
      if (opts.crashAtStep === batch.step) throw new PolarError(`crash in step ${batch.step}`);
      events.push({ kind: 'train-end', step: batch.step });
    },
  };
}

const base = { steps: 4, tasksPerStep: 2, groupSize: 2, slots: 4, version: 0 };

describe('the staleness scheduler', () => {
  test('K = 0: each step samples only from the newest policy, the next step starts after it', async () => {
    const driver = standIn({ tasks: ['a', 'b'], cost: (g) => (g === 1 ? 40 : 2), trainTurns: 10 });
    const journal = memoryJournal();
    const s = new StalenessScheduler({ ...base, maxStaleness: 0, journal }, driver);
    await s.run();
    assert.equal(driver.batches.length, 4);
    checkBound(driver.batches, 0);
    // no launch of step n+1 before step n's training ended
    let trainedUpTo = 0;
    for (const e of driver.events) {
      if (e.kind === 'train-end') trainedUpTo = e.step!;
      if (e.kind === 'launch')
        assert.ok(e.step! <= trainedUpTo + 1, `group for step ${e.step} after ${trainedUpTo}`);
    }
    for (const b of driver.batches)
      assert.deepEqual(b.staleness, { max: 0, mean: 0, carried: 0, dropped: 0 });
  });

  test('K = 1: rollouts run while a step trains; a slow group is carried with its version', async () => {
    // group 0 is slow: step 1 trains groups 1 and 2 (2 is meant for step 2), group 0 is carried into step 2
    const driver = standIn({ tasks: ['a', 'b'], cost: (g) => (g === 0 ? 30 : 2), trainTurns: 10 });
    const journal = memoryJournal();
    const s = new StalenessScheduler({ ...base, maxStaleness: 1, journal }, driver);
    await s.run();
    assert.equal(driver.batches.length, 4);
    checkBound(driver.batches, 1);
    // samples ran while step 1 trained: some ended between its start and its end
    const i0 = driver.events.findIndex((e) => e.kind === 'train-start' && e.step === 1);
    const i1 = driver.events.findIndex((e) => e.kind === 'train-end' && e.step === 1);
    assert.ok(
      driver.events.slice(i0, i1).some((e) => e.kind === 'sample-end'),
      'samples ran during training',
    );
    // the time accounting adds up: the trainer's busy and waiting time within the wall time, the slots'
    // busy and held-back time within their capacity (bench/loop.ts prints these)
    const st = s.stats;
    assert.ok(st.trainBusyMs > 0 && st.slotBusyMs > 0);
    assert.ok(st.trainWaitDueMs >= 0 && st.trainWaitFewMs >= 0 && st.slotHeldMs >= 0);
    assert.ok(st.trainBusyMs + st.trainWaitDueMs + st.trainWaitFewMs <= st.wallMs + 1, JSON.stringify(st));
    assert.ok(st.slotBusyMs + st.slotHeldMs <= st.slots * st.wallMs + 1, JSON.stringify(st));
    const [first, second] = driver.batches;
    assert.deepEqual(first!.groups.map((g) => g.group).sort(), [1, 2]);
    assert.ok(
      second!.groups.some((g) => g.group === 0 && g.meantFor === 1),
      'group 0 carried into step 2',
    );
    assert.equal(second!.staleness.carried, 2, 'two samples of group 0 carried');
    assert.ok(
      driver.batches.some((b) => b.staleness.max === 1),
      'some samples trained one version late',
    );
    // the journal says which groups each step trained, before it trained
    const batches = journal.records.filter((r) => r.type === 'batch');
    assert.deepEqual(
      batches.map((b) => (b.type === 'batch' ? b.groups : [])),
      driver.batches.map((b) => b.groups.map((g) => g.group)),
    );
  });

  test('K = 2: more groups due than a step trains: the stalest are dropped, fresh ones replace them', async () => {
    // version 0 launches groups 0-5 (steps 1-3); 0-3 are slow, so steps 1 and 2 train fast groups and
    // step 3 finds four groups of version 0 due: it trains two, the other two are too stale for step 4
    const driver = standIn({ tasks: ['a', 'b'], cost: (g) => (g < 4 ? 60 : 2), trainTurns: 10 });
    // each step its own tasks, as polar loop's driver gives them: a relaunch must run the dropped
    // group's task, not the schedule's next one (which is launched already)
    driver.taskFor = (step, index) => `s${step}-t${index}`;
    const journal = memoryJournal();
    const s = new StalenessScheduler({ ...base, slots: 16, maxStaleness: 2, journal }, driver);
    await s.run();
    assert.equal(driver.batches.length, 4);
    checkBound(driver.batches, 2);
    const dropped = journal.records.flatMap((r) => (r.type === 'dropped' ? [r] : []));
    assert.deepEqual(
      dropped.map((r) => [r.group, r.step]),
      [
        [2, 4],
        [3, 4],
      ],
    );
    assert.equal(driver.batches[3]!.staleness.dropped, 4, 'two groups of two samples');
    assert.ok(driver.batches[2]!.groups.every((g) => g.group < 2 && g.versions.every((v) => v === 0)));
    assert.equal(driver.batches[2]!.staleness.max, 2);
    assert.deepEqual(
      dropped.map((r) => r.reason),
      ['stale', 'stale'],
    );
    // the replacements: launched after the drop, each for its dropped group's task, which it names
    const launched = journal.records.flatMap((r) => (r.type === 'group' ? [r] : []));
    assert.equal(launched.length, 4 * 2 + 2);
    assert.deepEqual(
      launched.slice(-2).map((r) => [r.replaces, r.task]),
      [
        [2, 's2-t0'],
        [3, 's2-t1'],
      ],
    );
    // every task of the schedule trained once, none twice
    const trained = driver.batches.flatMap((b) => b.groups.map((g) => g.task)).sort();
    const scheduled = [1, 2, 3, 4].flatMap((step) => [`s${step}-t0`, `s${step}-t1`]).sort();
    assert.deepEqual(trained, scheduled);
  });

  test('a crash mid-step resumes from the journal: nothing lost, nothing trained twice', async () => {
    const dir = tempDir('polar-async-');
    const path = join(dir, 'schedule.jsonl');
    const runs = new Map<number, number>();
    const crashing = standIn({
      tasks: ['a', 'b'],
      cost: (g) => (g === 0 ? 30 : 2),
      trainTurns: 10,
      crashAtStep: 3,
      runs,
    });
    const first = new StalenessScheduler({ ...base, maxStaleness: 1, journal: fileJournal(path) }, crashing);
    await assert.rejects(first.run(), /crash in step 3/);
    const crashedBatch = crashing.batches.at(-1)!;
    const trainedBefore = crashing.batches.slice(0, 2).flatMap((b) => b.groups.map((g) => g.group));

    const replay = await readJournal(path);
    const again = standIn({ tasks: ['a', 'b'], cost: () => 2, trainTurns: 10, runs });
    const second = new StalenessScheduler(
      { ...base, version: 2, maxStaleness: 1, journal: fileJournal(path), replay },
      again,
    );
    await second.run();
    assert.deepEqual(
      again.batches.map((b) => b.step),
      [3, 4],
    );
    assert.deepEqual(
      again.batches[0]!.groups.map((g) => g.group),
      crashedBatch.groups.map((g) => g.group),
      'step 3 trains the batch it journalled',
    );
    assert.deepEqual(again.batches[0]!.groups, crashedBatch.groups, 'with the same versions');
    const all = [...trainedBefore, ...again.batches.flatMap((b) => b.groups.map((g) => g.group))];
    assert.equal(new Set(all).size, all.length, 'no group trained twice');
    assert.equal(all.length, 8);
    checkBound([...crashing.batches.slice(0, 2), ...again.batches], 1);
    // a group complete before the crash is not run again
    for (const g of crashedBatch.groups) assert.equal(runs.get(g.group), 1);
  });

  test('a sample of a version that resume rolls back is never trained', async () => {
    const journal = memoryJournal([
      { v: 1, type: 'group', group: 0, task: 'a', meant_for: 1 },
      { v: 1, type: 'group', group: 1, task: 'b', meant_for: 1 },
      { v: 1, type: 'sample', group: 0, sample: 0, policy_version: 0 },
      { v: 1, type: 'sample', group: 0, sample: 1, policy_version: 0 },
      { v: 1, type: 'complete', group: 0 },
      { v: 1, type: 'sample', group: 1, sample: 0, policy_version: 0 },
      // a version 1 published, then a crash before step 1's step.json: it is redone
      { v: 1, type: 'sample', group: 1, sample: 1, policy_version: 1 },
    ]);
    const driver = standIn({ tasks: ['a', 'b'], cost: () => 2, trainTurns: 2 });
    const s = new StalenessScheduler(
      { ...base, steps: 1, maxStaleness: 1, journal, replay: [...journal.records] },
      driver,
    );
    await s.run();
    const [batch] = driver.batches;
    assert.ok(!batch!.groups.some((g) => g.group === 1), 'group 1 dropped');
    assert.ok(batch!.groups.every((g) => g.versions.every((v) => v === 0)));
    assert.equal(batch!.staleness.dropped, 2);
    const drop = journal.records.find((r) => r.type === 'dropped');
    assert.deepEqual(drop, { v: 1, type: 'dropped', group: 1, step: 1, reason: 'rolled_back' });
    assert.deepEqual(
      batch!.groups.map((g) => g.task),
      ['a', 'b'],
      "group 1's task b runs again",
    );
  });

  test('the journal: a cut last line is ignored, a bad line elsewhere is refused', async () => {
    const dir = tempDir('polar-async-');
    const path = join(dir, 'schedule.jsonl');
    const good = JSON.stringify({ v: 1, type: 'group', group: 0, task: 'a', meant_for: 1 });
    writeFileSync(path, `${good}\n{"v":1,"type":"sam`);
    assert.equal((await readJournal(path)).length, 1);
    writeFileSync(path, `{"v":1,"type":"sample","group":0}\n${good}\n`);
    await assert.rejects(
      readJournal(path),
      (e: Error) => PolarError.isInstance(e) && /schedule.jsonl:1/.test(e.message),
    );
    assert.deepEqual(await readJournal(join(dir, 'absent.jsonl')), []);
  });
});
