/**
 * decodeIds (src/capture/delta.ts), format v2's prompt ids: `keep` ids of the base's prompt then its
 * completion, then `add`. Each way `keep` can fall, against the same ids made by hand, and each array
 * the caller's own.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DeltaError, decodeIds } from '../../../src/capture/delta.ts';

const prompt = Array.from({ length: 300 }, (_, i) => i);
const completion = [1000, 1001, 1002];
const expect = (keep: number, add: number[]) => [...prompt, ...completion].slice(0, keep).concat(add);

describe('decodeIds', () => {
  test('keep inside the prompt, at its end, inside the completion, at its end', () => {
    for (const keep of [0, 1, 150, 299, 300, 301, 302, 303]) {
      for (const add of [[], [7], [7, 8, 9]]) {
        const got = decodeIds(prompt, completion, { keep, add }, 'prompt_token_ids');
        assert.deepEqual(got, expect(keep, add), `keep ${keep}, add ${add.length}`);
        assert.notEqual(got, prompt);
        assert.notEqual(got, add);
      }
    }
    assert.deepEqual(decodeIds(prompt, null, { keep: 300, add: [5] }, 'p'), [...prompt, 5]);
  });

  test('what the caller gets is its own: changing it changes neither the base nor the delta', () => {
    const add = [7, 8];
    const got = decodeIds(prompt, completion, { keep: 302, add }, 'p');
    got.fill(-1);
    assert.deepEqual(
      prompt,
      Array.from({ length: 300 }, (_, i) => i),
    );
    assert.deepEqual(completion, [1000, 1001, 1002]);
    assert.deepEqual(add, [7, 8]);
  });

  test('a keep past the base, below zero or not an integer, and a malformed delta, name the field', () => {
    for (const delta of [
      { keep: 304, add: [] },
      { keep: -1, add: [] },
    ]) {
      assert.throws(
        () => decodeIds(prompt, completion, delta, 'prompt_token_ids'),
        (e: unknown) => {
          assert.ok(e instanceof DeltaError);
          assert.match(e.message, /keeps -?\d+ ids of a base with 303/);
          return true;
        },
      );
    }
    for (const delta of [{ keep: 1.5, add: [] }, { keep: 3 }, null, [1]])
      assert.throws(() => decodeIds(prompt, completion, delta, 'prompt_token_ids'), DeltaError);
  });
});
