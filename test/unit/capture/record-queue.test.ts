/**
 * The session's `complete` (src/capture/call-record.ts recordCalls) keeps the record work off the response
 * path, as docs/capture-format.md says: a call is numbered at once, in the order calls end, and its record
 * is built, encoded and appended on the next turn of the event loop (after the answer's last bytes left),
 * in that order; `flush` writes what is queued now (session_end comes after it) and nothing twice.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { completedCall, startRecording } from '../../support/call-recording.ts';
import { tempDir } from '../../support/temp.ts';

function lines(file: string): Array<{ id: string; seq: number }> {
  const text = readFileSync(file, 'utf8');
  return text === ''
    ? []
    : text
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as { id: string; seq: number });
}

for (const format of [1, 2] as const) {
  test(`format v${format}: calls are numbered at once and written on the next turn, in the order they ended`, async () => {
    const file = join(tempDir('polar-queue-'), 'c.jsonl');
    const { writer, counters, complete } = startRecording(file, { format });
    complete(completedCall('call_b'));
    complete(completedCall('call_a'));
    assert.equal(counters.seq, 2, 'numbered when handed over');
    assert.deepEqual(lines(file), [], 'nothing written on the call path');
    assert.equal(counters.calls, 0);
    await nextTurn();
    assert.deepEqual(
      lines(file).map((r) => [r.id, r.seq]),
      [
        ['call_b', 0],
        ['call_a', 1],
      ],
    );
    assert.equal(counters.calls, 2);
    writer.close();
  });
}

test('flush writes the queued calls now, and the next turn writes nothing twice', async () => {
  const file = join(tempDir('polar-queue-'), 'c.jsonl');
  const { writer, counters, complete } = startRecording(file);
  complete(completedCall('call_1'));
  complete(completedCall('call_2'));
  complete.flush();
  assert.deepEqual(
    lines(file).map((r) => r.id),
    ['call_1', 'call_2'],
  );
  await nextTurn();
  complete(completedCall('call_3'));
  await nextTurn();
  assert.deepEqual(
    lines(file).map((r) => [r.id, r.seq]),
    [
      ['call_1', 0],
      ['call_2', 1],
      ['call_3', 2],
    ],
  );
  assert.equal(counters.calls, 3);
  writer.close();
});
