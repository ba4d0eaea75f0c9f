/**
 * polar loop --dynamic-sampling (issue 30, part 4): the step's rounds of rollouts with a stand-in for the
 * loop's evaluation that writes each task's graded captures with rewards the test sets (uniform or not),
 * counted by polar build as the loop's build counts them. Uniform groups trigger extra draws of the next
 * unused rows; the counts; the draws written before each round; a redone step reuses them; the next
 * step's first row.
 */
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  drawTasks,
  firstDraw,
  nextRow,
  recordedDraws,
  sampleStep,
} from '../../../src/loop/dynamic-sampling.ts';
import { LOOP_FILES, type StepSummary } from '../../../src/loop/files.ts';
import type { SweInstance } from '../../../src/rollout/dataset.ts';
import { tempDir } from '../../support/temp.ts';
import { call, grading, ids, jsonl, session, sessionEnd } from '../trajectory/builder.ts';

const ROWS = 10;
const all = Array.from({ length: ROWS }, (_, i) => ({ instance_id: `t${i}` }) as SweInstance);

/** The loop's evaluation, standing in: each task's samples graded with the rewards `rewardsOf` gives. */
function standIn(
  rewardsOf: (task: string) => number[],
  log: { round: number; tasks: string[]; draws: string[] }[],
) {
  return async (tasks: SweInstance[], dir: string): Promise<void> => {
    const round = Number(/eval(?:-(\d+))?$/.exec(dir)![1] ?? 0);
    const stepDir = join(dir, '..');
    const draws = JSON.parse(await readFile(join(stepDir, LOOP_FILES.draws), 'utf8')) as {
      rounds: { tasks: string[] }[];
    };
    log.push({ round, tasks: tasks.map((t) => t.instance_id), draws: draws.rounds.at(-1)!.tasks });
    await mkdir(join(dir, 'captures'), { recursive: true });
    for (const t of tasks) {
      const records: unknown[] = [];
      rewardsOf(t.instance_id).forEach((reward, sample) => {
        const s = `${t.instance_id}-s${sample}`;
        records.push(
          session(s, { task_id: t.instance_id, sample }),
          call(s, { prompt: ids(1, 4), completion: [...ids(100 + sample, 3), 151645] }),
          sessionEnd(s, 'completed', 1),
          grading(s, reward, { task_id: t.instance_id, sample }),
        );
      });
      await writeFile(join(dir, 'captures', `${t.instance_id}.jsonl`), jsonl(records));
    }
  };
}

test('drawing: the next unused rows, wrapping around, never a task twice in a step', () => {
  assert.deepEqual(
    drawTasks(all, 8, 3, new Set()).tasks.map((t) => t.instance_id),
    ['t8', 't9', 't0'],
  );
  const d = drawTasks(all, 8, 3, new Set(['t9', 't0']));
  assert.deepEqual(
    d.tasks.map((t) => t.instance_id),
    ['t8', 't1', 't2'],
  );
  assert.equal(d.to, 13, 'rows read, skipped ones too');
  assert.equal(drawTasks(all, 0, 3, new Set(all.map((t) => t.instance_id))).tasks.length, 0);
  // without dynamic sampling each step takes --tasks-per-step rows (tasksForStep's rotation)
  const done = (rows?: number) => ({ ...(rows ? { dynamic_sampling: { rows } } : {}) }) as StepSummary;
  assert.equal(nextRow([done(), done()], 3), 6);
  assert.equal(nextRow([done(), done(7)], 3), 10);
});

test('uniform groups trigger extra rounds of the shortfall until the quota; counts; draws recorded first', async () => {
  const stepDir = tempDir('polar-ds-');
  // t0, t1, t2 uniform (all 1 or all 0), the rest informative
  const uniform = new Set(['t0', 't1', 't2']);
  const rewardsOf = (id: string) => (uniform.has(id) ? [1, 1] : [1, 0]);
  const log: { round: number; tasks: string[]; draws: string[] }[] = [];
  const first = firstDraw(all, 0, 4);
  const got = await sampleStep({
    stepDir,
    step: 1,
    trainSet: all,
    first,
    quota: 4,
    extraRounds: 3,
    recorded: [],
    rollout: standIn(rewardsOf, log),
  });
  // round 0: t0..t3, 1 informative -> short 3: t4 t5 t6, all informative -> quota met
  assert.deepEqual(
    log.map((l) => l.tasks),
    [
      ['t0', 't1', 't2', 't3'],
      ['t4', 't5', 't6'],
    ],
  );
  for (const l of log) assert.deepEqual(l.draws, l.tasks, 'each round written to draws.json before it ran');
  assert.deepEqual(got.sampled.summary, { rounds: 1, drawn: 3, dropped: 3, informative: 4, rows: 7 });
  assert.equal(got.sampled.dropUniform, true);
  assert.deepEqual(got.sampled.inputs, [join(stepDir, 'eval'), join(stepDir, 'eval-1')]);
  assert.equal(got.sampled.tasks.length, 7);

  // a step whose groups are all uniform: N extra rounds, then it trains on everything
  const dull = tempDir('polar-ds-');
  const none = await sampleStep({
    stepDir: dull,
    step: 2,
    trainSet: all,
    first: firstDraw(all, 7, 2),
    quota: 2,
    extraRounds: 2,
    recorded: [],
    rollout: standIn(() => [0, 0], []),
  });
  assert.deepEqual(none.sampled.summary, { rounds: 2, drawn: 4, dropped: 0, informative: 0, rows: 6 });
  assert.equal(none.sampled.dropUniform, false, 'nothing informative: nothing dropped');
});

test('a step redone after a stop rolls out the draws it recorded, not new ones', async () => {
  const stepDir = tempDir('polar-ds-');
  const uniform = new Set(['t0', 't1']);
  const first = firstDraw(all, 0, 2);
  const log: { round: number; tasks: string[]; draws: string[] }[] = [];
  await sampleStep({
    stepDir,
    step: 1,
    trainSet: all,
    first,
    quota: 2,
    extraRounds: 2,
    recorded: [],
    rollout: standIn((id) => (uniform.has(id) ? [0, 0] : [1, 0]), log),
  });
  const recorded = await recordedDraws(stepDir);
  assert.deepEqual(
    recorded.map((r) => r.tasks),
    [
      ['t0', 't1'],
      ['t2', 't3'],
    ],
  );
  // the redo: the draws file says round 1 took t2, t3; a set whose order changed since must not matter
  const reordered = [...all].reverse();
  const again: { round: number; tasks: string[]; draws: string[] }[] = [];
  const redo = await sampleStep({
    stepDir,
    step: 1,
    trainSet: reordered,
    first,
    quota: 2,
    extraRounds: 2,
    recorded,
    rollout: standIn((id) => (uniform.has(id) ? [0, 0] : [1, 0]), again),
  });
  assert.deepEqual(
    again.map((l) => l.tasks),
    log.map((l) => l.tasks),
  );
  assert.equal(redo.sampled.summary.rows, 4);
});
