/**
 * For the tests of polar loop's staleness scheduler (src/loop/async.ts) with stand-in drivers:
 * `memoryJournal` keeps the schedule records in an array (no file, no real time), `turns(n)` lets the
 * event loop run n turns, and `checkBound(batches, K)` asserts what every schedule of those tests must
 * hold: each step trains `perStep` groups, no group twice, and no sample more than K versions late or of
 * a version not yet published.
 */
import assert from 'node:assert/strict';
import type { Batch, Journal, ScheduleRecord } from '../../src/loop/async.ts';

/** A journal that appends to `records` (given: a journal to replay, as one left by an earlier run). */
export function memoryJournal(records: ScheduleRecord[] = []): Journal & { records: ScheduleRecord[] } {
  return {
    records,
    async append(r) {
      records.push(r);
    },
  };
}

/** Lets the event loop run `n` turns. */
export async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

export function checkBound(batches: Batch[], K: number, perStep = 2): void {
  const seen = new Set<number>();
  for (const b of batches) {
    assert.equal(b.groups.length, perStep, `step ${b.step} trains ${perStep} groups`);
    for (const g of b.groups) {
      assert.ok(!seen.has(g.group), `group ${g.group} trained once`);
      seen.add(g.group);
      for (const v of g.versions) {
        assert.ok(b.step - 1 - v <= K, `step ${b.step}: a sample of version ${v} (bound ${K})`);
        assert.ok(v <= b.step - 1, 'no sample from a version not yet published');
      }
    }
    assert.ok(b.staleness.max <= K);
  }
}
