/**
 * A report never makes a figure up (issue 31 item 5): with nothing graded pass@1 is null and prints
 * "n/a"; a sample without results has no pass@1 of its own; pass@k waits for every sample.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { evalSummary } from '../../../../src/inspect/reader.ts';
import {
  buildReport,
  formatReport,
  type ResultLine,
  reportSchema,
} from '../../../../src/rollout/run/report.ts';

const context = { dataset: 'd', agent: 'a', model: 'm', runtime: 'local', instances: ['x', 'y'], samples: 3 };
const line = (instance_id: string, sample: number, resolved: boolean): ResultLine => ({
  instance_id,
  repo: 'o/r',
  sample,
  status: resolved ? 'resolved' : 'unresolved',
  resolved,
  reward: resolved ? 1 : 0,
  reason: null,
  suspicious: false,
  durations_ms: { total: 1, agent: 0, tests: 0, overhead: 1 },
});

test('nothing graded: pass@1 null ("n/a"), no std over samples that never ran', () => {
  const report = buildReport([], context);
  assert.equal(report.pending, 6);
  assert.deepEqual(report.pass_at_1, { mean: null, std: null, sem: null, per_sample: [null, null, null] });
  assert.equal(report.pass_at_k['1'], null);
  const text = formatReport(report);
  assert.match(text, /^pass@1 {2}n\/a \(6 of 6 not run: --resume runs them\)$/m);
  assert.doesNotMatch(text, /0\.0%|std over/);
});

test('cut short: each sample over its own results, pass@k only for a complete run', () => {
  const partial = buildReport([line('x', 0, true), line('y', 0, false), line('x', 1, true)], context);
  assert.deepEqual(partial.pass_at_1.per_sample, [0.5, 1, null]);
  assert.equal(partial.pass_at_1.mean, 0.75);
  assert.equal(partial.pending, 3);
  assert.equal(partial.pass_at_k['2'], null);
  assert.match(formatReport(partial), /pass@1 {2}75\.0% ± 35\.4% \(std over 2 samples/);
  const all = ['x', 'y'].flatMap((id) => [0, 1, 2].map((j) => line(id, j, id === 'x')));
  const complete = buildReport(all, context);
  assert.equal(complete.pending, 0);
  assert.equal(complete.pass_at_1.mean, 0.5);
  assert.equal(complete.pass_at_k['2'], 0.5);
});

test("report.json's schema takes what the writer writes with nothing graded: null rates and pending", () => {
  const report = JSON.parse(JSON.stringify(buildReport([], context)));
  assert.deepEqual(reportSchema.parse(report).pass_at_1.per_sample, [null, null, null]);
  const warnings: string[] = [];
  const summary = evalSummary(report, warnings);
  assert.deepEqual(warnings, [], 'polar inspect reads it without a complaint');
  assert.equal(summary?.pass_at_1, null);
  assert.equal(summary?.total, 0);
  assert.equal(reportSchema.safeParse({ ...report, pending: -1 }).success, false);
});
