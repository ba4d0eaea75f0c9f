/**
 * polar train refuses a batch with nothing to learn (issue 18): every advantage 0 (groups of one, or
 * uniform rewards) is refused before Python is even looked for; progress shows within a step.
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

  test('advantages given as 0 by polar build: refused; one non-zero advantage or one mixed group is enough', async () => {
    const dir = await tempDir();
    const zero = (id: string, advantage: number) => ({ ...trajectory(id, [trace], 1, 'g'), advantage });
    const file = await writeJsonl(join(dir, 'zero.jsonl'), [zero('a', 0), zero('b', 0)]);
    await assert.rejects(
      runTrain(
        { trajectories: file, out: join(dir, 'out'), flags: { model: TINY, device: 'cpu' } },
        { probe: noPython },
      ),
      /2 rollouts with advantage 0/,
    );
    const one = await writeJsonl(join(dir, 'one.jsonl'), [zero('a', 0), zero('b', 0.5)]);
    assert.equal((await checkTrajectories(one, { requireLogprobs: true, maxTraceTokens: 100 })).learnable, 1);
    const mixed = await writeJsonl(join(dir, 'mixed.jsonl'), smallBatch());
    assert.equal(
      (await checkTrajectories(mixed, { requireLogprobs: true, maxTraceTokens: 100 })).learnable,
      8,
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
