/**
 * `polar loop` checks the trainer's set-up before any rollout (issue 31 item 3): the device (it defaults
 * to cuda), the Python, the model and its vocabulary against the rollouts' tokenizer, so a missing GPU
 * or a model of the wrong vocabulary is found in seconds, not after the first step's rollouts.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import { UsageError } from '../../../src/errors.ts';
import { checkLoopTrainer, type LoopFlags, loopOptions } from '../../../src/loop/command.ts';
import { DEFAULTS } from '../../../src/options/defaults.ts';
import { findPython, probeDevices } from '../../../src/train/env.ts';
import { modelVocabSize } from '../../../src/train/model-info.ts';
import { tempDir } from '../../support/temp.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
const tmp = tempDir('polar-loop-preflight-');
const python = await findPython(process.env.POLAR_PYTHON).catch(() => null);
const devices = python?.torch ? await probeDevices(python.python) : null;
const hasGpu = devices !== null && 'cuda' in devices && devices.cuda;

const flags = (extra: Partial<LoopFlags>): LoopFlags => ({
  trainSet: join(ROOT, 'fixtures/loop/coin.jsonl'),
  harness: 'pi',
  groupSize: 2,
  tasksPerStep: 1,
  steps: 1,
  evalEvery: 0,
  out: join(tmp, 'run'),
  concurrency: 1,
  device: 'cpu',
  runtime: 'local',
  repos: join(ROOT, 'fixtures/swe/repos'),
  agentTimeout: 60_000,
  testTimeout: 60_000,
  backend: 'embedded',
  model: 'tiny:arch=qwen3,vocab=64',
  envCache: join(tmp, 'envs'),
  envs: false,
  grader: { kind: 'polar' },
  memoryLimit: DEFAULTS.memoryLimit.value,
  pidsLimit: DEFAULTS.pidsLimit.value,
  diskLimit: DEFAULTS.diskLimit.value,
  clusterCpus: DEFAULTS.clusterCpus.value,
  clusterMemory: DEFAULTS.clusterMemoryBytes.value,
  clusterRetries: DEFAULTS.clusterRetries.value,
  ...extra,
});

describe('the loop checks its trainer before any rollout', () => {
  test("a model whose vocabulary is smaller than the rollouts' tokenizer: refused, naming both", async () => {
    await assert.rejects(checkLoopTrainer(loopOptions(flags({}))), (e: unknown) => {
      assert.ok(e instanceof UsageError);
      assert.match(
        e.message,
        /--train-model tiny:arch=qwen3,vocab=64 has a vocabulary of 64 ids, but the tokenizer of the rollouts .* has 151669/,
      );
      assert.match(String(e.hint), /vocab=151669/);
      return true;
    });
    assert.equal(modelVocabSize('tiny:arch=llama'), 64, "the worker's default (schema.json tiny)");
    assert.equal(modelVocabSize(join(tmp, 'nowhere')), null);
  });

  test(
    'no GPU with the default --device cuda: exit 4 in seconds, nothing written, no harness',
    { skip: !python?.torch ? 'no Python with torch' : hasGpu ? 'this machine has a GPU' : false },
    async () => {
      const out = join(tmp, 'cuda');
      const r = await execa(
        process.execPath,
        [
          join(ROOT, 'bin/polar'),
          'loop',
          '--train-set',
          join(ROOT, 'fixtures/loop/coin.jsonl'),
          '--harness',
          'pi',
          '--backend',
          'vllm',
          '--backend-url',
          'http://127.0.0.1:9/v1',
          '--model',
          'm',
          '--train-model',
          'tiny:arch=qwen3,vocab=151669',
          '--out',
          out,
        ],
        { reject: false, env: { NO_COLOR: '1', POLAR_PYTHON: python!.executable } },
      );
      assert.equal(r.exitCode, 4, r.stderr);
      assert.match(r.stderr, /polar: error: no CUDA GPU available/);
      assert.match(r.stderr, /--device cpu/);
      assert.doesNotMatch(
        r.stderr,
        /nothing listens|step 1/,
        'the trainer is checked before the server and any rollout',
      );
      assert.ok(!existsSync(join(out, 'config.json')));
    },
  );
});
