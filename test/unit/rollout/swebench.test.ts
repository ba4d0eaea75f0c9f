import assert from 'node:assert/strict';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Agent } from '../../../src/rollout/agents.ts';
import type { SweInstance } from '../../../src/rollout/dataset.ts';
import type { Report, ResultLine } from '../../../src/rollout/run/report.ts';
import type { Runtime } from '../../../src/rollout/runtime/types.ts';
import { runSwebenchGrader, swebenchArgs } from '../../../src/rollout/swebench.ts';
import { tempDir } from '../../support/temp.ts';
import { MINI, ROOT } from './run/helpers.ts';

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

/**
 * A stand-in for `python -m swebench.harness.run_evaluation`: it writes the run report the real harness
 * writes (swebench/harness/reporting.py, make_run_report, schema_version 2: `<model>.<run_id>.json` in
 * the working directory with resolved_ids / unresolved_ids / empty_patch_ids / error_ids), grading every
 * instance as an empty patch except the ids in $FAKE_ERROR_IDS, which it reports as errors.
 */
const FAKE_SWEBENCH = `#!/usr/bin/env node
const { writeFileSync } = require('node:fs');
const args = process.argv.slice(2);
if (args[0] === '-c') { console.log('4.1.0'); process.exit(0); }
const runId = args[args.indexOf('--run_id') + 1];
const ids = args.slice(args.indexOf('--instance_ids') + 1);
const errors = (process.env.FAKE_ERROR_IDS || '').split(',');
const report = {
  resolved_ids: [], unresolved_ids: [],
  empty_patch_ids: ids.filter((i) => !errors.includes(i)),
  error_ids: ids.filter((i) => errors.includes(i)),
  submitted_ids: ids, schema_version: 2,
};
writeFileSync('fake__model.' + runId + '.json', JSON.stringify(report));
`;

test("--grader swebench keeps polar's own error; an official error is no reward either", async () => {
  const dir = tempDir('polar-swebench-');
  const python = join(dir, 'python');
  writeFileSync(python, FAKE_SWEBENCH);
  chmodSync(python, 0o755);
  const line = (id: string, status: ResultLine['status'], reward: number | null): ResultLine => ({
    instance_id: id,
    repo: 'o/r',
    sample: 0,
    status,
    resolved: false,
    reward,
    reason: status === 'error' ? 'the harness got no model answer' : null,
    suspicious: false,
    durations_ms: { total: 0, agent: 0, tests: 0, overhead: 0 },
  });
  const results = [line('a', 'error', null), line('b', 'unresolved', 0), line('c', 'unresolved', 0)];
  const saved = { python: process.env.POLAR_PYTHON, errors: process.env.FAKE_ERROR_IDS };
  process.env.POLAR_PYTHON = python;
  process.env.FAKE_ERROR_IDS = 'b';
  try {
    const graded = await runSwebenchGrader(
      { report: {} as Report, results, interrupted: false },
      {
        out: dir,
        dataset: MINI,
        concurrency: 1,
        instances: ['a', 'b', 'c'].map((instance_id) => ({ instance_id }) as SweInstance),
        agent: { name: 'pi', modelName: 'fake/model' } as Agent,
        runtime: { kind: 'local' } as Runtime,
        samples: 1,
      },
    );
    const by = Object.fromEntries(graded.results.map((r) => [r.instance_id, r]));
    assert.equal(by.a!.status, 'error', "polar's own error is not overwritten by the official grade");
    assert.equal(by.a!.reward, null);
    assert.equal(by.a!.reason, 'the harness got no model answer');
    assert.equal(by.b!.status, 'error');
    assert.equal(by.b!.reward, null, 'an official error is an infrastructure failure: no reward');
    assert.equal(by.c!.status, 'empty_patch');
    assert.equal(by.c!.reward, 0);
    assert.equal(graded.report.counts.error, 2);
  } finally {
    if (saved.python === undefined) delete process.env.POLAR_PYTHON;
    else process.env.POLAR_PYTHON = saved.python;
    if (saved.errors === undefined) delete process.env.FAKE_ERROR_IDS;
    else process.env.FAKE_ERROR_IDS = saved.errors;
  }
});
