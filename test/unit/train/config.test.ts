import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { InputError, UsageError } from '../../../src/errors.ts';
import { readUserConfig, resolveTrainConfig } from '../../../src/train/config.ts';
import { flagsToOptions, TRAIN_DEFAULTS } from '../../../src/train/options.ts';
import { tempDir } from './fixtures.ts';

const base = { trajectories: '/d/t.jsonl', out: '/d/out' };

describe('train config', () => {
  test('defaults follow the recipe and bf16 follows the device', () => {
    const c = resolveTrainConfig({ ...base, flags: { model: 'm' } });
    assert.equal(c.lr, 1e-6);
    assert.equal(c.clip_low, 0.2);
    assert.equal(c.clip_high, 0.28);
    assert.equal(c.loss_agg, 'token-mean');
    assert.equal(c.tis, true);
    assert.equal(c.kl_coef, 0);
    assert.deepEqual(c.adam_betas, [0.9, 0.98]);
    assert.equal(c.bf16, true);
    assert.equal(resolveTrainConfig({ ...base, flags: { model: 'm', device: 'cpu' } }).bf16, false);
    assert.equal(c.resume, null);
  });

  test('flags override the config file, which overrides the defaults', () => {
    const c = resolveTrainConfig({
      ...base,
      file: { lr: 3e-6, kl_coef: 0.001, model: 'from-file' },
      flags: flagsToOptions({ lr: 5e-6, tis: undefined }),
    });
    assert.equal(c.lr, 5e-6);
    assert.equal(c.kl_coef, 0.001);
    assert.equal(c.model, 'from-file');
    assert.equal(c.tis, TRAIN_DEFAULTS.tis);
    const noTis = resolveTrainConfig({ ...base, file: { tis: true }, flags: { model: 'm', tis: false } });
    assert.equal(noTis.tis, false);
  });

  test('bad values name the flag and the value', () => {
    assert.throws(
      () => resolveTrainConfig({ ...base, flags: { model: 'm', lr: -1 } }),
      (e: unknown) => e instanceof UsageError && /--lr/.test(e.message) && /-1/.test(e.message),
    );
    assert.throws(
      () => resolveTrainConfig({ ...base, flags: { model: 'm', batch_rollouts: 1.5 } }),
      (e: unknown) => e instanceof UsageError && /--batch-rollouts/.test(e.message),
    );
    assert.throws(() => resolveTrainConfig({ ...base, flags: {} }), /--model is required/);
    assert.throws(
      () => resolveTrainConfig({ ...base, flags: { model: 'm', gpus: 2, lora: true } }),
      /--lora with --gpus/,
    );
    assert.throws(
      () => resolveTrainConfig({ ...base, flags: { model: 'm', gpus: 2, device: 'cpu' } }),
      /--device cuda/,
    );
    // --nproc is the CPU's data parallelism, --gpus the GPU's
    assert.throws(
      () => resolveTrainConfig({ ...base, flags: { model: 'm', nproc: 2, device: 'cuda' } }),
      /--nproc is for --device cpu/,
    );
    assert.throws(
      () => resolveTrainConfig({ ...base, flags: { model: 'm', nproc: 2, device: 'cpu', lora: true } }),
      /--nproc > 1/,
    );
    assert.equal(resolveTrainConfig({ ...base, flags: { model: 'm', nproc: 2, device: 'cpu' } }).nproc, 2);
  });

  test("LoRA across nodes (--nnodes, a loop's --train-nodes) is refused, naming the flag or the file's key", () => {
    const nodes = { count: 2, flag: '--nnodes' };
    const configFile = { path: '/cfg/train.json', flag: '--config' };
    const refusal = (what: string, fix: string) => (e: unknown) =>
      e instanceof UsageError &&
      e.message ===
        `${what} with --nnodes 2 is not supported: LoRA trains in one process (as with --gpus > 1), not across nodes` &&
      e.hint!.startsWith(`${fix} to train the whole model across the nodes, or leave --nnodes at 1`);
    assert.throws(
      () => resolveTrainConfig({ ...base, flags: { model: 'm', lora: true }, nodes }),
      refusal('--lora', 'drop --lora'),
    );
    assert.throws(
      () => resolveTrainConfig({ ...base, file: { lora: true }, configFile, flags: { model: 'm' }, nodes }),
      refusal('"lora": true in --config /cfg/train.json', 'set "lora" to false in /cfg/train.json'),
    );
    // the same LoRA on one node, and the whole model on two, are runs
    assert.equal(
      resolveTrainConfig({ ...base, file: { lora: true }, configFile, flags: { model: 'm' } }).lora,
      true,
    );
    const one = { count: 1, flag: '--nnodes' };
    assert.equal(
      resolveTrainConfig({ ...base, file: { lora: true }, flags: { model: 'm' }, nodes: one }).lora,
      true,
    );
    assert.equal(
      resolveTrainConfig({ ...base, file: { lora: false }, configFile, flags: { model: 'm' }, nodes }).lora,
      false,
    );
    // --gpus 2 names where LoRA came from as well
    assert.throws(
      () => resolveTrainConfig({ ...base, file: { lora: true }, configFile, flags: { model: 'm', gpus: 2 } }),
      (e: unknown) =>
        e instanceof UsageError &&
        e.message.startsWith('"lora": true in --config /cfg/train.json with --gpus > 1'),
    );
  });

  test('--resume without --model takes the model from the checkpoint', () => {
    const c = resolveTrainConfig({ ...base, resume: '/d/ckpt', flags: {} });
    assert.equal(c.model, '/d/ckpt');
    assert.equal(c.resume, '/d/ckpt');
  });

  test('the config file is strict: an unknown key is an error naming it', async () => {
    const dir = await tempDir();
    const file = join(dir, 'train.json');
    await writeFile(file, JSON.stringify({ lr: 1e-5, learning_rate: 1 }));
    await assert.rejects(
      readUserConfig(file),
      (e: unknown) => e instanceof InputError && /learning_rate/.test(e.message),
    );
    await writeFile(file, JSON.stringify({ lr: 1e-5, loss_agg: 'seq-mean-token-mean' }));
    assert.deepEqual(await readUserConfig(file), { lr: 1e-5, loss_agg: 'seq-mean-token-mean' });
    await writeFile(file, '{nope');
    await assert.rejects(readUserConfig(file), /not valid JSON/);
  });
});
