import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { firstIssue, issuePath, readLenient } from '../../../src/util/zod.ts';

test('issuePath: one format for every field name, a[0].b', () => {
  assert.equal(issuePath(['input', 3, 'call_id']), 'input[3].call_id');
  assert.equal(issuePath([0, 'a']), '[0].a');
  assert.equal(issuePath([]), '(body)');
  assert.equal(issuePath([], '(file)'), '(file)');
  const parsed = z.object({ traces: z.array(z.object({ mask: z.array(z.number()) })) }).safeParse({
    traces: [{ mask: [1, 'x'] }],
  });
  assert.equal(parsed.success, false);
  assert.equal(firstIssue(parsed.error!).field, 'traces[0].mask[1]');
});

const written = z.looseObject({
  name: z.string(),
  score: z.object({ mean: z.number(), std: z.number() }),
  counts: z.record(z.enum(['ok', 'bad']), z.number()),
  tags: z.array(z.object({ id: z.number() })),
});

test('readLenient: missing fields are fine, wrong ones are dropped and named, the rest is kept', () => {
  const { data, problems } = readLenient(written, {
    score: { mean: 0.5, std: 'high' },
    counts: { ok: 2, other: 1 },
    tags: [{ id: 1 }, { id: 'two' }],
    extra: true,
  });
  assert.deepEqual(data, { score: { mean: 0.5 }, counts: { ok: 2 }, tags: [{ id: 1 }, {}], extra: true });
  assert.deepEqual(problems.sort(), [
    'counts.other: Invalid key in record',
    'score.std: expected number',
    'tags[1].id: expected number',
  ]);
});

test('readLenient: a value of the wrong kind is null with its problem; the input is not changed', () => {
  assert.deepEqual(readLenient(written, [1]), { data: null, problems: ['(file): expected object'] });
  const input = { name: 3 };
  assert.deepEqual(readLenient(written, input), { data: {}, problems: ['name: expected string'] });
  assert.deepEqual(input, { name: 3 });
});
