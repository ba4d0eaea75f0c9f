import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  GRPO_EPS,
  groupAdvantages,
  isUniform,
  mean,
  stdUnbiased,
} from '../../../src/trajectory/advantage.ts';

const close = (a: number, b: number): boolean => Math.abs(a - b) < 1e-9;

describe('advantages', () => {
  it('grpo: mean-centred, divided by the unbiased std plus eps', () => {
    const adv = groupAdvantages([1, 0, 0, 0], 'grpo') as number[];
    const sd = Math.sqrt((0.75 ** 2 + 3 * 0.25 ** 2) / 3);
    assert.ok(close(adv[0]!, 0.75 / (sd + GRPO_EPS)));
    assert.ok(close(adv[1]!, -0.25 / (sd + GRPO_EPS)));
  });

  it('rloo: reward minus the mean of the others', () => {
    assert.deepEqual(groupAdvantages([1, 0, 0, 1], 'rloo'), [1 - 1 / 3, -2 / 3, -2 / 3, 1 - 1 / 3]);
  });

  it('dr-grpo: reward minus the group mean, no std', () => {
    assert.deepEqual(groupAdvantages([1, 0, 0, 1], 'dr-grpo'), [0.5, -0.5, -0.5, 0.5]);
  });

  it('a group of one has advantage 0; none gives null', () => {
    assert.deepEqual(groupAdvantages([1], 'grpo'), [0]);
    assert.deepEqual(groupAdvantages([1], 'rloo'), [0]);
    assert.deepEqual(groupAdvantages([1, 0], 'none'), [null, null]);
  });

  it('uniform groups get zero advantage under every estimator', () => {
    for (const k of ['grpo', 'dr-grpo', 'rloo'] as const) {
      assert.ok(groupAdvantages([0.5, 0.5, 0.5], k).every((a) => a === 0));
    }
    assert.equal(isUniform([1, 1, 1]), true);
    assert.equal(isUniform([1, 0]), false);
  });

  it('property: grpo and dr-grpo advantages sum to 0; rloo = G/(G-1) * dr-grpo', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: -10, max: 10, noNaN: true }), { minLength: 2, maxLength: 32 }),
        (r) => {
          const dr = groupAdvantages(r, 'dr-grpo') as number[];
          const g = groupAdvantages(r, 'grpo') as number[];
          const l = groupAdvantages(r, 'rloo') as number[];
          const n = r.length;
          assert.ok(Math.abs(dr.reduce((a, b) => a + b, 0)) < 1e-8);
          assert.ok(Math.abs(g.reduce((a, b) => a + b, 0)) < 1e-6 * (1 + 1 / (stdUnbiased(r) + GRPO_EPS)));
          for (const [i, x] of l.entries()) assert.ok(Math.abs(x - (n / (n - 1)) * dr[i]!) < 1e-8);
          assert.ok(Number.isFinite(mean(r)));
        },
      ),
    );
  });
});
