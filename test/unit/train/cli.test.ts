/**
 * End to end on the CPU: `node bin/polar train` on a hand-made trajectory file with the tiny model built by
 * the worker (no download), the GPU refusal, and a worker failure surfacing as one clear error line.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import { runPolar } from '../../support/cli.ts';
import { NO_TORCH, pythonWithTorch, smallBatch, TINY, tempDir, writeJsonl } from './fixtures.ts';

const probe = await pythonWithTorch();

function polar(args: string[]) {
  return runPolar(['train', ...args], { env: { POLAR_PYTHON: probe?.python ?? '' }, timeoutMs: 120_000 });
}

describe('polar train (CPU, end to end)', { skip: probe ? false : NO_TORCH }, () => {
  test('reads trajectories from stdin (polar build ... | polar train -)', async () => {
    const dir = await tempDir();
    const traj = await writeJsonl(join(dir, 'traj.jsonl'), smallBatch());
    const out = join(dir, 'ckpt');
    const r = await runPolar(
      ['train', '-', '--model', TINY, '--device', 'cpu', '--out', out, '--batch-rollouts', '4'],
      { env: { POLAR_PYTHON: probe?.python ?? '' }, timeoutMs: 120_000, inputFile: traj },
    );
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(await readFile(join(out, 'trajectories.jsonl'), 'utf8'), await readFile(traj, 'utf8'));
    assert.ok((await readFile(join(out, 'metrics.jsonl'), 'utf8')).trim().length > 0);
  });

  test('trains the tiny model: checkpoint, metrics.jsonl and the resolved config', async () => {
    const dir = await tempDir();
    const traj = await writeJsonl(join(dir, 'traj.jsonl'), smallBatch());
    const out = join(dir, 'ckpt');
    const r = await polar([
      traj,
      '--model',
      TINY,
      '--device',
      'cpu',
      '--out',
      out,
      '--batch-rollouts',
      '4',
      '--lr',
      '0.01',
    ]);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.match(r.stderr, /step 1\/2 {2}loss/);
    assert.match(r.stderr, /step 2\/2 {2}loss .* kl .* clip .* ent .* gnorm .* tok\/s .* mem/);
    const config = JSON.parse(await readFile(join(out, 'config.json'), 'utf8'));
    assert.equal(config.device, 'cpu');
    assert.equal(config.tis, true);
    assert.equal(config.lr, 0.01);
    assert.equal(config.model, TINY);
    assert.equal(config.environment.python, probe?.executable);
    const metrics = (await readFile(join(out, 'metrics.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      metrics.map((m) => m.step),
      [1, 2],
    );
    for (const key of ['loss', 'kl', 'clip_frac', 'entropy', 'grad_norm', 'tokens_per_s', 'tis_mean']) {
      assert.equal(typeof metrics[0][key], 'number', key);
    }
    assert.equal((await readFile(join(out, 'latest'), 'utf8')).trim(), 'step-2');
    const meta = JSON.parse(await readFile(join(out, 'step-2', 'polar_checkpoint.json'), 'utf8'));
    assert.equal(meta.step, 2);
    assert.ok(['torch', 'safetensors'].includes(meta.format));
    assert.ok(existsSync(join(out, 'step-2', meta.format === 'torch' ? 'model.pt' : 'model.safetensors')));
    assert.ok(existsSync(join(out, 'step-2', 'trainer_state.pt')));

    // resume: one more epoch over the same file continues from step 2
    const again = await polar([
      traj,
      '--resume',
      out,
      '--device',
      'cpu',
      '--out',
      out,
      '--epochs',
      '2',
      '--batch-rollouts',
      '4',
    ]);
    assert.equal(again.exitCode, 0, again.stderr);
    assert.match(again.stderr, /resumed from .*step-2 at step 2/);
    assert.equal((await readFile(join(out, 'latest'), 'utf8')).trim(), 'step-4');
  });

  test('refuses to train without a GPU unless --device cpu', async () => {
    const cuda = await execa(probe?.python ?? 'python3', [
      '-c',
      'import torch; print(torch.cuda.is_available())',
    ]);
    if (cuda.stdout.trim() === 'True') return; // a GPU machine has one
    const dir = await tempDir();
    const traj = await writeJsonl(join(dir, 'traj.jsonl'), smallBatch());
    const r = await polar([traj, '--model', TINY, '--out', join(dir, 'o')]);
    assert.equal(r.exitCode, 4);
    assert.match(r.stderr, /polar: error: no CUDA GPU available/);
    assert.match(r.stderr, /--device cpu/);
    assert.ok(!existsSync(join(dir, 'o', 'config.json')), 'nothing written before the refusal');
  });

  test('a worker failure is one clear error line, not a traceback', async () => {
    const dir = await tempDir();
    const traj = await writeJsonl(join(dir, 'traj.jsonl'), smallBatch());
    const r = await polar([traj, '--model', 'tiny:vocab=8', '--device', 'cpu', '--out', join(dir, 'o')]);
    assert.equal(r.exitCode, 1);
    const errors = r.stderr.split('\n').filter((l) => l.startsWith('polar: error:'));
    assert.equal(errors.length, 1, r.stderr);
    assert.match(
      errors[0]!,
      /training worker failed: line 1: traces\[0\]: token id \d+ is outside the model's vocabulary \(size 8\)/,
    );
    assert.doesNotMatch(r.stderr, /Traceback/);
    assert.match(await readFile(join(dir, 'o', 'worker.log'), 'utf8'), /Traceback/);
  });

  test('bad data is refused before the worker starts', async () => {
    const dir = await tempDir();
    const traj = await writeJsonl(join(dir, 'traj.jsonl'), smallBatch({ logprobs: false }));
    const r = await polar([traj, '--model', TINY, '--device', 'cpu', '--out', join(dir, 'o')]);
    assert.equal(r.exitCode, 3);
    assert.match(r.stderr, /traj\.jsonl:1: traces\[0\]\.response_logprobs: null/);
    assert.match(r.stderr, /--no-tis/);
    const ok = await polar([
      traj,
      '--model',
      TINY,
      '--device',
      'cpu',
      '--no-tis',
      '--out',
      join(dir, 'o'),
      '--max-steps',
      '1',
    ]);
    assert.equal(ok.exitCode, 0, ok.stderr);
  });
});
