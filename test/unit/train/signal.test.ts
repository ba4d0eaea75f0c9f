/**
 * polar train refuses a batch with nothing to learn (issue 18): every advantage 0 (groups of one, or
 * uniform rewards: the worker computes the advantages from them) is refused before Python is even looked
 * for; progress shows within a step.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { InputError } from '../../../src/errors.ts';
import { runTrain } from '../../../src/train/launch.ts';
import { formatMicro, quarterReached, TrainProgress } from '../../../src/train/progress.ts';
import { checkTrajectories } from '../../../src/train/trajectories.ts';
import { smallBatch, TINY, tempDir, trajectory, writeJsonl } from './fixtures.ts';

const trace = { prompt: [1, 2], response: [3, 4], mask: [1, 1] as (0 | 1)[] };
// a prober that fails the test if the launcher gets as far as looking for Python
const noPython = async () => {
  throw new Error('the refusal must come before the Python environment is probed');
};

describe('nothing to learn', () => {
  test('groups of one (--samples 1): refused, naming the cause and the fix', async () => {
    const dir = await tempDir();
    const file = await writeJsonl(join(dir, 'single.jsonl'), [
      trajectory('a', [trace], 1, 'task-a'),
      trajectory('b', [trace], 0, 'task-b'),
    ]);
    await assert.rejects(
      runTrain(
        { trajectories: file, out: join(dir, 'out'), flags: { model: TINY, device: 'cpu' } },
        { probe: noPython },
      ),
      (e: unknown) =>
        e instanceof InputError &&
        e.field === 'advantage' &&
        /no trajectory has a non-zero advantage \(2 rollouts in 2 groups whose rewards are all equal\)/.test(
          e.message,
        ) &&
        /--samples 4/.test(String(e.hint)),
    );
  });

  test("an older build's advantages (trajectory v1) are not what counts: the rewards of each group are", async () => {
    const dir = await tempDir();
    // v1 records whose recorded advantages are non-zero, but whose group's rewards are all equal: the
    // worker computes the advantages itself (0 here), so there is nothing to learn
    const v1 = (id: string, reward: number, advantage: number | null) => ({
      ...trajectory(id, [trace], reward, 'g'),
      v: 1,
      advantage,
    });
    const file = await writeJsonl(join(dir, 'v1.jsonl'), [v1('a', 1, 0.5), v1('b', 1, -0.5)]);
    await assert.rejects(
      runTrain(
        { trajectories: file, out: join(dir, 'out'), flags: { model: TINY, device: 'cpu' } },
        { probe: noPython },
      ),
      /no trajectory has a non-zero advantage \(2 rollouts in 1 group whose rewards are all equal\)/,
    );
    // one group whose rewards differ is enough, in v1 and v2 alike
    const mixedV1 = await writeJsonl(join(dir, 'mixed-v1.jsonl'), [v1('a', 1, 0), v1('b', 0, 0)]);
    assert.equal(
      (await checkTrajectories(mixedV1, { requireLogprobs: true, maxTraceTokens: 100 })).learnable,
      2,
    );
    const mixed = await writeJsonl(join(dir, 'mixed.jsonl'), smallBatch());
    assert.equal(
      (await checkTrajectories(mixed, { requireLogprobs: true, maxTraceTokens: 100 })).learnable,
      8,
    );
    // rollouts without a group are groups of their own, even when they share a task
    const loose = await writeJsonl(join(dir, 'loose.jsonl'), [
      { ...trajectory('a', [trace], 1, 't'), group_id: null },
      { ...trajectory('b', [trace], 0, 't'), group_id: null },
    ]);
    const summary = await checkTrajectories(loose, { requireLogprobs: true, maxTraceTokens: 100 });
    assert.deepEqual([summary.learnable, summary.groups], [0, 2]);
  });

  test('a v1 record with an advantage but no reward is refused, naming the fix', async () => {
    const dir = await tempDir();
    const file = await writeJsonl(join(dir, 'old.jsonl'), [
      { ...trajectory('a', [trace], null, 'g'), v: 1, advantage: 1 },
    ]);
    await assert.rejects(
      checkTrajectories(file, { requireLogprobs: true, maxTraceTokens: 100 }),
      (e: unknown) =>
        e instanceof InputError &&
        /old\.jsonl:1: reward: null, with an advantage from an older polar build \(trajectory v1\)/.test(
          e.message,
        ) &&
        /rebuild the trajectories/.test(String(e.hint)),
    );
  });
});

describe('one run per --out', () => {
  test('an --out that holds a training run is refused without --resume', async () => {
    const dir = await tempDir();
    const out = join(dir, 'out');
    await mkdir(out);
    await writeFile(join(out, 'latest'), 'step-2\n');
    const file = await writeJsonl(join(dir, 't.jsonl'), smallBatch());
    await assert.rejects(
      runTrain({ trajectories: file, out, flags: { model: TINY, device: 'cpu' } }, { probe: noPython }),
      /--out .* already holds a training run[\s\S]*/,
    );
  });
});

describe('progress within a step', () => {
  test('micro-batch events: a line at each quarter without a terminal, the count in words', () => {
    assert.equal(
      formatMicro({ event: 'micro', step: 2, total_steps: 5, phase: 'update', done: 3, total: 8 }),
      'step 2/5  update: micro-batch 3/8',
    );
    const shown = Array.from({ length: 8 }, (_, i) => i + 1).filter((d) => quarterReached(d, 8));
    assert.deepEqual(shown, [2, 4, 6, 8]);
    assert.deepEqual(
      [1, 2, 3].filter((d) => quarterReached(d, 3)),
      [1, 2, 3],
    );
    const lines: string[] = [];
    const saved = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string) => {
      lines.push(String(chunk));
      return true;
    }) as typeof process.stderr.write;
    try {
      const progress = new TrainProgress({ tty: false });
      for (let done = 1; done <= 4; done++)
        progress.event({ event: 'micro', step: 1, total_steps: 1, phase: 'reference', done, total: 4 });
    } finally {
      process.stderr.write = saved;
    }
    assert.equal(lines.filter((l) => /reference pass: micro-batch \d\/4/.test(l)).length, 4);
  });
});
