import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import { formatStep, progressBar, TrainProgress } from '../../../src/train/progress.ts';

describe('train progress', () => {
  test('a step line carries reward, |advantage|, response length, loss, KL, clip fraction, entropy, grad norm, tokens/s and GPU memory', () => {
    const line = formatStep({
      event: 'step',
      step: 3,
      total_steps: 10,
      reward_mean: 0.625,
      reward_std: 0.4841,
      advantage_abs_mean: 0.9682,
      response_tokens_mean: 1234.5,
      loss: -0.01234,
      kl: 0.0005,
      clip_frac: 0.0731,
      entropy: 1.5,
      grad_norm: 0.75,
      tokens_per_s: 12345,
      gpu_mem_gb: 40.25,
    });
    assert.equal(
      line,
      'step 3/10  reward 0.625±0.484  |adv| 0.968  resp 1.2k  loss -0.0123  kl 0.0005  clip 0.073  ent 1.500  gnorm 0.750  tok/s 12.3k  mem 40.3G',
    );
    assert.match(
      formatStep({ event: 'step', step: 1, total_steps: 1, gpu_mem_gb: null, loss: null }),
      /^step 1\/1 {2}reward - {2}\|adv\| - {2}resp - {2}loss -.*mem -$/,
    );
  });

  test('the bar fills with the steps', () => {
    assert.equal(progressBar(0, 4, 8), '[--------]');
    assert.equal(progressBar(2, 4, 8), '[####----]');
    assert.equal(progressBar(9, 4, 8), '[########]');
  });

  test('--json forwards the events unchanged to stdout', () => {
    const out = new PassThrough();
    const p = new TrainProgress({ json: true, tty: false, stdout: out });
    p.event({ event: 'step', step: 1, total_steps: 2, loss: 0.5 });
    assert.deepEqual(JSON.parse(String(out.read())), { event: 'step', step: 1, total_steps: 2, loss: 0.5 });
  });
});
