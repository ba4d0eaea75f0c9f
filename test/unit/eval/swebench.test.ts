import assert from 'node:assert/strict';
import { test } from 'node:test';
import { swebenchArgs } from '../../../src/eval/swebench.ts';
import { MINI, ROOT } from './helpers.ts';

test('--grader swebench: a relative local dataset becomes absolute; --split and --timeout are passed on', () => {
  const local = swebenchArgs('fixtures/swe/mini.jsonl', '/o/p.jsonl', 'r1', 2, ['a', 'b'], {
    split: 'test',
    testTimeoutMs: 1_800_500,
    cwd: ROOT,
  });
  assert.deepEqual(local, [
    '-m',
    'swebench.harness.run_evaluation',
    '--dataset_name',
    MINI,
    '--split',
    'test',
    '--predictions_path',
    '/o/p.jsonl',
    '--max_workers',
    '2',
    '--timeout',
    '1801',
    '--run_id',
    'r1',
    '--instance_ids',
    'a',
    'b',
  ]);
  const hub = swebenchArgs('princeton-nlp/SWE-bench_Verified', '/o/p.jsonl', 'r1', 1, ['a'], {
    split: 'test',
  });
  assert.equal(hub[3], 'princeton-nlp/SWE-bench_Verified');
  assert.ok(!hub.includes('--timeout'));
});
