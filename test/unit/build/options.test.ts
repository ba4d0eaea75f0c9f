import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normalizeBuildOptions } from '../../../src/build/command.ts';
import { UsageError } from '../../../src/errors.ts';

describe('polar build options', () => {
  it('defaults', () => {
    const o = normalizeBuildOptions(['a.jsonl'], {});
    assert.equal(o.format, 'polar');
    assert.equal(o.advantage, 'grpo');
    assert.equal(o.groupBy, 'task_id');
    assert.deepEqual(o.eotIds, [151645, 151643]);
    assert.equal(o.maxTokens, null);
    assert.equal(o.maxTokensMode, 'truncate');
    assert.equal(o.outputFile, null);
    assert.equal(o.reportOnly, false);
  });

  it('parses lists and numbers', () => {
    const o = normalizeBuildOptions(['-'], {
      eotId: '7, 9',
      excludeKind: 'compaction,side',
      maxTokens: '32768',
      overlong: 'drop',
      groupBy: 'meta:prompt',
      format: 'verl',
    });
    assert.deepEqual(o.eotIds, [7, 9]);
    assert.deepEqual(o.excludeKinds, ['compaction', 'side']);
    assert.equal(o.maxTokens, 32768);
    assert.equal(o.maxTokensMode, 'drop');
    assert.equal(o.groupBy, 'meta:prompt');
    assert.equal(o.format, 'verl');
  });

  const bad: [string, string[], Record<string, unknown>, RegExp][] = [
    ['no inputs', [], {}, /at least one input/],
    ['stdin twice', ['-', '-'], {}, /once/],
    ['unknown format', ['a'], { format: 'csv' }, /--format: 'csv'/],
    ['unknown advantage', ['a'], { advantage: 'ppo' }, /--advantage: 'ppo'/],
    ['bad max tokens', ['a'], { maxTokens: '1e3' }, /--max-tokens: '1e3'/],
    ['bad overlong', ['a'], { overlong: 'skip' }, /--overlong: 'skip'/],
    ['unknown kind', ['a'], { excludeKind: 'root,tool' }, /--exclude-kind: 'tool'/],
    ['bad eot', ['a'], { eotId: 'im_end' }, /--eot-id: 'im_end'/],
    ['bad group', ['a'], { groupBy: 'model' }, /--group-by: 'model'/],
    ['stats with -o', ['a'], { stats: true, output: 'x' }, /--stats writes no trajectories/],
  ];
  for (const [name, inputs, raw, message] of bad) {
    it(`rejects ${name}`, () => {
      assert.throws(
        () => normalizeBuildOptions(inputs, raw),
        (e: unknown) => e instanceof UsageError && message.test(e.message),
      );
    });
  }
});
