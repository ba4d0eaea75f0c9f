/**
 * The one source of truth: schema.json (what the Python worker reads) is generated from the TypeScript
 * schema and must be up to date; the worker's events are checked against workerEventSchema.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { SCHEMA_JSON } from '../../../scripts/gen-train-schema.ts';
import { lossAggregations, TRAIN_DEFAULTS } from '../../../src/train/options.ts';
import { CHECKPOINT_FILES, workerEventSchema, workerSchemaText } from '../../../src/train/schema.ts';

test('schema.json is up to date (regenerate: node --import tsx scripts/gen-train-schema.ts)', () => {
  const schema = JSON.parse(readFileSync(SCHEMA_JSON, 'utf8'));
  assert.deepEqual(schema, JSON.parse(workerSchemaText()));
  assert.deepEqual(schema.defaults, JSON.parse(JSON.stringify(TRAIN_DEFAULTS)));
  assert.deepEqual(schema.enums.loss_agg, [...lossAggregations]);
  assert.deepEqual(schema.files, CHECKPOINT_FILES);
  assert.equal(schema.options.type, 'object');
  assert.ok(schema.options.properties.loss_agg.enum.includes('dr-grpo'));
});

test('worker events: the protocol accepts what the worker writes and refuses what it must not', () => {
  const ok = [
    { event: 'log', message: 'training', world_size: 2 },
    { event: 'step', step: 1, total_steps: 2, loss: 0.5, kl: null, tokens_per_s: 10, extra_metric: 1 },
    { event: 'checkpoint', step: 1, path: '/o/step-1', format: 'safetensors' },
    { event: 'micro', step: 1, total_steps: 2, phase: 'reference', done: 1, total: 3 },
    { event: 'micro', step: 2, total_steps: 2, phase: 'update', done: 6, total: 6 },
    { event: 'done', steps: 1, checkpoint: '/o/step-1', loss: null },
    { event: 'error', kind: 'non_finite', message: 'non-finite loss', traceback: 'TB' },
  ];
  for (const e of ok) assert.ok(workerEventSchema.safeParse(e).success, JSON.stringify(e));
  const bad = [
    { event: 'step', step: 0, total_steps: 2 },
    { event: 'step', step: 1, total_steps: 2, loss: 'high' },
    { event: 'checkpoint', step: 1, path: '/o/step-1', format: 'torch' },
    { event: 'done' },
    { event: 'error', message: 'no kind' },
    { event: 'progress', step: 1 },
    { event: 'micro', step: 1, total_steps: 2, phase: 'backward', done: 1, total: 3 },
    { event: 'micro', step: 1, total_steps: 2, phase: 'update', done: 0, total: 3 },
  ];
  for (const e of bad) assert.ok(!workerEventSchema.safeParse(e).success, JSON.stringify(e));
});
