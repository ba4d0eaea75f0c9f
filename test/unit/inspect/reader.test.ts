import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { InputError } from '../../../src/errors.ts';
import { evalSummary, isRunDir, readRunDir, readTrajectoryFile } from '../../../src/inspect/reader.ts';
import { runCharts, stepRow } from '../../../src/inspect/report.ts';
import { tempDir } from '../../support/temp.ts';
import { makeRunDir, sampleRecords, writeJsonl } from './helpers.ts';

const root = tempDir('polar-inspect-reader-');
after(() => rmSync(root, { recursive: true, force: true }));

describe('trajectory files', () => {
  test('reads valid records and counts invalid lines instead of failing', async () => {
    const path = join(root, 'traj.jsonl');
    const records = await sampleRecords();
    writeJsonl(path, [records[0], { v: 1, id: 'broken' }, records[1]]);
    appendFileSync(path, 'not json\n');
    const file = await readTrajectoryFile(path);
    assert.deepEqual(
      file.records.map((r) => r.id),
      ['sess-a', 'sess-b'],
    );
    assert.equal(file.invalid.length, 2);
    assert.match(file.invalid[0] as string, /traj\.jsonl:2: /);
    assert.match(file.invalid[1] as string, /traj\.jsonl:4: not valid JSON/);
  });
});

describe('run directories', () => {
  test('reads every step, tolerating a step still running', async () => {
    const dir = join(root, 'run');
    await makeRunDir(dir, { running: true });
    assert.equal(isRunDir(dir), true);
    const run = readRunDir(dir);
    assert.deepEqual(run.config, { steps: 3, harness: 'pi', model: 'qwen3-test' });
    assert.deepEqual(
      run.steps.map((s) => [s.step, s.status]),
      [
        [1, 'done'],
        [2, 'done'],
        [3, 'running'],
      ],
    );
    const [s1, s2, s3] = run.steps;
    assert.ok(s1 && s2 && s3);
    assert.equal(s1.metrics.length, 2);
    assert.equal(s1.metrics[1]?.loss, 0.3);
    assert.equal(s1.eval?.pass_at_1, 0.25);
    assert.equal(s1.heldout, null);
    assert.equal(s2.heldout?.pass_at_1, 0.4);
    assert.equal(s1.buildStats?.calls_merged, 2);
    assert.equal(s1.captures, 1);
    assert.ok(s1.trajFile?.endsWith('step-1/traj.jsonl'));
    assert.equal(s1.started_at, '2025-01-01T00:01:00.000Z');
    // step 3: no step.json, no traj, half-written files become warnings
    assert.equal(s3.trajFile, null);
    assert.equal(s3.eval, null);
    assert.equal(s3.buildStats, null);
    assert.equal(s3.metrics.length, 1);
    assert.equal(run.warnings.length, 2);
    assert.ok(run.warnings.some((w) => w.includes('step-3/build-stats.json')));
    assert.ok(run.warnings.some((w) => w.includes('step-3/train/metrics.jsonl:2')));
  });

  test('steps sort numerically and a step row averages its metrics lines', async () => {
    const dir = join(root, 'run-many');
    mkdirSync(join(dir, 'step-10'), { recursive: true });
    mkdirSync(join(dir, 'step-0', 'onnx'), { recursive: true });
    mkdirSync(join(dir, 'step-2', 'train'), { recursive: true });
    mkdirSync(join(dir, 'step-x'), { recursive: true });
    writeJsonl(join(dir, 'step-2', 'train', 'metrics.jsonl'), [
      { event: 'step', step: 1, loss: 1, kl: 0.1, clip_frac: 0.2, tokens_per_s: 100 },
      { event: 'log', message: 'hello' },
      { event: 'step', step: 2, loss: 3, kl: null, clip_frac: 0.4, tokens_per_s: 300 },
    ]);
    const run = readRunDir(dir);
    assert.deepEqual(
      run.steps.map((s) => s.step),
      [2, 10],
    );
    // the starting policy's held-out eval (polar loop's baseline) makes step 0 a row
    mkdirSync(join(dir, 'step-0', 'heldout'), { recursive: true });
    writeFileSync(
      join(dir, 'step-0', 'heldout', 'report.json'),
      JSON.stringify({ pass_at_1: { mean: 0.25, std: 0 }, total: 8, counts: {} }),
    );
    const withBaseline = readRunDir(dir);
    assert.deepEqual(
      withBaseline.steps.map((s) => [s.step, s.status, s.heldout?.pass_at_1]),
      [
        [0, 'start', 0.25],
        [2, 'running', undefined],
        [10, 'running', undefined],
      ],
    );
    rmSync(join(dir, 'step-0', 'heldout'), { recursive: true });
    assert.equal(run.config, null);
    const row = stepRow(run.steps[0] as never, null);
    assert.equal(row.loss, 2);
    assert.equal(row.kl, 0.1);
    assert.ok(Math.abs((row.clip_frac ?? 0) - 0.3) < 1e-12);
    assert.equal(row.tokens_per_s, 200);
    assert.equal(row.pass_at_1, null);
    const charts = runCharts([row, stepRow(run.steps[1] as never, null)]);
    assert.deepEqual(
      charts.map((c) => c.title),
      [
        'reward (mean over rollouts)',
        'pass@1',
        'loss',
        'KL (k3, per token)',
        'clip fraction',
        'tokens/s (train)',
        'rollout health',
      ],
    );
    assert.deepEqual(charts[2]?.series[0]?.points, [
      [2, 2],
      [10, null],
    ]);
  });

  test('a directory without loop.json or step-N is not a run', () => {
    const dir = join(root, 'plain');
    mkdirSync(dir, { recursive: true });
    assert.equal(isRunDir(dir), false);
    assert.throws(() => readRunDir(dir), InputError);
  });

  test('evalSummary takes the fields of src/rollout/run/report.ts Report and tolerates others', () => {
    assert.deepEqual(
      evalSummary({
        pass_at_1: { mean: 0.5, std: 0.1 },
        samples: 2,
        instances: 4,
        total: 8,
        counts: { resolved: 4, x: 'y' },
      }),
      { pass_at_1: 0.5, pass_at_1_std: 0.1, samples: 2, instances: 4, total: 8, counts: { resolved: 4 } },
    );
    assert.equal(evalSummary(null), null);
    assert.equal(evalSummary([1])?.pass_at_1 ?? null, null);
  });
});

test("step.json's pass@1 stands in when a report file is gone; eval/captures are counted", async () => {
  const dir = join(root, 'run-summary');
  await makeRunDir(dir);
  rmSync(join(dir, 'step-2', 'eval', 'report.json'));
  rmSync(join(dir, 'step-2', 'heldout', 'report.json'));
  mkdirSync(join(dir, 'step-2', 'eval', 'captures'), { recursive: true });
  appendFileSync(join(dir, 'step-2', 'eval', 'captures', 'x__s0.jsonl'), '');
  const stepJson = join(dir, 'step-2', 'step.json');
  const meta = JSON.parse(readFileSync(stepJson, 'utf8'));
  writeFileSync(
    stepJson,
    JSON.stringify({ ...meta, rollouts: { pass_at_1: 0.75, samples: 2 }, heldout: { pass_at_1: 0.3 } }),
  );
  const s2 = readRunDir(dir).steps[1];
  assert.equal(s2?.eval?.pass_at_1, 0.75);
  assert.equal(s2?.heldout?.pass_at_1, 0.3);
  assert.equal(s2?.captures, 2);
});

test("a step whose rollouts had no result: step.json's null pass@1 is shown as '–', not dropped", async () => {
  const dir = join(root, 'run-null');
  await makeRunDir(dir);
  rmSync(join(dir, 'step-2', 'eval', 'report.json'));
  rmSync(join(dir, 'step-2', 'heldout', 'report.json'));
  const stepJson = join(dir, 'step-2', 'step.json');
  const meta = JSON.parse(readFileSync(stepJson, 'utf8'));
  writeFileSync(
    stepJson,
    JSON.stringify({ ...meta, rollouts: { pass_at_1: null, samples: 2 }, heldout: { pass_at_1: null } }),
  );
  const run = readRunDir(dir);
  const s2 = run.steps[1];
  assert.deepEqual(run.warnings, []);
  assert.equal(s2?.status, 'done');
  assert.equal(s2?.eval?.samples, 2);
  assert.equal(s2?.eval?.pass_at_1, null);
  assert.equal(s2?.heldout?.pass_at_1, null);
  // the page's step table prints a null rate as '–' (src/inspect/html.ts)
  const row = s2 ? stepRow(s2, null) : null;
  assert.equal(row?.pass_at_1, null);
  assert.equal(row?.heldout_pass_at_1, null);
});

test('a run is read through its writers’ schemas: a field of the wrong type is a warning naming it', async () => {
  const dir = join(root, 'run-typed');
  await makeRunDir(dir);
  const report = join(dir, 'step-1', 'eval', 'report.json');
  writeFileSync(
    report,
    JSON.stringify({ ...JSON.parse(readFileSync(report, 'utf8')), pass_at_1: { mean: '25%' } }),
  );
  const stepJson = join(dir, 'step-2', 'step.json');
  writeFileSync(
    stepJson,
    JSON.stringify({ ...JSON.parse(readFileSync(stepJson, 'utf8')), status: 'finished' }),
  );
  writeJsonl(join(dir, 'step-2', 'train', 'metrics.jsonl'), [
    { event: 'step', step: 1, loss: 'NaN', kl: 0.5 },
  ]);
  writeFileSync(
    join(dir, 'step-2', 'build-stats.json'),
    JSON.stringify({ calls_used: 'four', calls_merged: 2, rewards: { capture: 2, file: -1 } }),
  );
  const run = readRunDir(dir);
  const [s1, s2] = run.steps;
  assert.deepEqual(s2?.buildStats, { calls_merged: 2, rewards: { capture: 2 } });
  assert.equal(s1?.eval?.pass_at_1, null);
  assert.equal(s1?.eval?.total, 4);
  assert.equal(s2?.status, 'running');
  assert.deepEqual(s2?.metrics, [{ event: 'step', step: 1, kl: 0.5 }]);
  assert.deepEqual(run.warnings.map((w) => w.slice(dir.length)).sort(), [
    '/step-1/eval/report.json: pass_at_1.mean: expected number',
    '/step-2/build-stats.json: calls_used: expected number',
    '/step-2/build-stats.json: rewards.file: Too small: expected number to be >=0',
    '/step-2/step.json: status: expected one of "done"',
    '/step-2/train/metrics.jsonl:1: loss: expected number',
  ]);
});
