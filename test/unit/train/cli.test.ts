/**
 * End to end on the CPU: `node bin/polar train` on a hand-made trajectory file with the tiny model built by
 * the worker (no download), the GPU refusal, and a worker failure surfacing as one clear error line.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import { runPolar } from '../../support/cli.ts';
import {
  madeUpLogprobs,
  NO_TORCH,
  pythonWithTorch,
  smallBatch,
  TINY,
  tempDir,
  writeJsonl,
} from './fixtures.ts';

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
      [
        'train',
        '-',
        '--model',
        TINY,
        '--device',
        'cpu',
        '--out',
        out,
        '--batch-rollouts',
        '4',
        '--config',
        await madeUpLogprobs(dir),
      ],
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
    const config = await madeUpLogprobs(dir);
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
      '--config',
      config,
    ]);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.match(r.stderr, /step 1\/2 {2}reward [\d.]+±[\d.]+ {2}\|adv\| [\d.]+ {2}resp \d+ {2}loss/);
    assert.match(r.stderr, /step 2\/2 {2}reward .* loss .* kl .* clip .* ent .* gnorm .* tok\/s .* mem/);
    const resolved = JSON.parse(await readFile(join(out, 'config.json'), 'utf8'));
    assert.equal(resolved.device, 'cpu');
    assert.equal(resolved.tis, true);
    assert.equal(resolved.lr, 0.01);
    assert.equal(resolved.model, TINY);
    assert.equal(resolved.environment.python, probe?.executable);
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
      '--config',
      config,
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
    // a model directory transformers cannot load: the worker fails, not the launcher's checks
    const model = join(dir, 'broken-model');
    await mkdir(model);
    await writeFile(join(model, 'config.json'), '{"model_type": "no-such-architecture"}\n');
    // a weights file, so that polar train's own check (weights there) lets it through to the worker
    await writeFile(join(model, 'model.safetensors'), '');
    const r = await polar([traj, '--model', model, '--device', 'cpu', '--out', join(dir, 'o')]);
    assert.equal(r.exitCode, 1, r.stderr);
    const errors = r.stderr.split('\n').filter((l) => l.startsWith('polar: error:'));
    assert.equal(errors.length, 1, r.stderr);
    assert.match(errors[0]!, /training worker failed: .*no-such-architecture/);
    assert.doesNotMatch(r.stderr, /Traceback/);
    assert.match(await readFile(join(dir, 'o', 'worker.log'), 'utf8'), /Traceback/);
  });

  test('-q: no progress on stderr, the error still shows (issue 31 item 14)', async () => {
    const dir = await tempDir();
    const traj = await writeJsonl(join(dir, 'traj.jsonl'), smallBatch());
    const model = join(dir, 'broken-model');
    await mkdir(model);
    await writeFile(join(model, 'config.json'), '{"model_type": "no-such-architecture"}\n');
    // a weights file, so that polar train's own check (weights there) lets it through to the worker
    await writeFile(join(model, 'model.safetensors'), '');
    const r = await polar([traj, '--model', model, '--device', 'cpu', '--out', join(dir, 'o'), '-q']);
    assert.equal(r.exitCode, 1, r.stderr);
    assert.doesNotMatch(r.stderr, /training .* on \d+ rollout/);
    assert.match(r.stderr, /polar: error: training worker failed/);
  });

  test("ids outside the model's vocabulary: refused at the first record, before any Python (issue 31 item 3)", async () => {
    const dir = await tempDir();
    const traj = await writeJsonl(join(dir, 'traj.jsonl'), smallBatch());
    const r = await polar([traj, '--model', 'tiny:vocab=8', '--device', 'cpu', '--out', join(dir, 'o')]);
    assert.equal(r.exitCode, 3, r.stderr);
    assert.match(
      r.stderr,
      /polar: error: .*traj\.jsonl:1: traces\.0\.response_ids: token id 11 is outside the vocabulary of tiny:vocab=8 \(8 ids\)/,
    );
    assert.ok(!existsSync(join(dir, 'o', 'worker.log')), 'no worker started');
  });

  test('trajectories sampled from another model: refused on the first batch, exit 3 (issue 31 item 4)', async () => {
    const dir = await tempDir();
    // smallBatch's logprobs (-1.5 each) are not what TINY gives these tokens
    const traj = await writeJsonl(join(dir, 'traj.jsonl'), smallBatch());
    const r = await polar([traj, '--model', TINY, '--device', 'cpu', '--out', join(dir, 'o')]);
    assert.equal(r.exitCode, 3, r.stderr);
    assert.match(
      r.stderr,
      /polar: error: training refused: the trajectories' sampling logprobs differ from tiny:.* by \d+\.\d+ nats per token over \d+ tokens of the first batch \(limit 2\): they were sampled from another model/,
    );
    assert.match(r.stderr, /traj\.jsonl was sampled from tiny, training starts from tiny:/);
    assert.match(r.stderr, /sampling_gap_limit/);
    assert.ok(!existsSync(join(dir, 'o', 'latest')), 'no checkpoint');
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
