import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SseDecoder, type SseEvent } from '../../../src/protocols/sse.ts';
import { seededRandom } from '../../../src/util/random.ts';

/** A stream's text, with \n or \r\n line ends, and the events it holds. */
function sample(rand: () => number, crlf: boolean): { text: string; events: SseEvent[] } {
  const nl = crlf ? '\r\n' : '\n';
  const events: SseEvent[] = [];
  let text = '';
  for (let i = 0; i < 20; i++) {
    const kind = (rand() * 5) | 0;
    const data = `{"i":${i},"t":"${'x'.repeat((rand() * 40) | 0)}"}`;
    if (kind === 0) {
      text += `: keep-alive${nl}${nl}`;
    } else if (kind === 1) {
      text += `event: delta${nl}data: ${data}${nl}${nl}`;
      events.push({ event: 'delta', data });
    } else if (kind === 2) {
      text += `data: a${nl}data:${data}${nl}${nl}`;
      events.push({ event: undefined, data: `a\n${data}` });
    } else {
      text += `data: ${data}${nl}${nl}`;
      events.push({ event: undefined, data });
    }
  }
  return { text, events };
}

test('the decoder gives the same events however a stream is cut, with \\n or \\r\\n line ends', () => {
  const rand = seededRandom(3);
  for (const crlf of [false, true]) {
    for (let round = 0; round < 200; round++) {
      const { text, events } = sample(rand, crlf);
      const decoder = new SseDecoder();
      const got: SseEvent[] = [];
      for (let at = 0; at < text.length; ) {
        const n = 1 + ((rand() * 30) | 0);
        got.push(...decoder.push(text.slice(at, at + n)));
        at += n;
      }
      got.push(...decoder.flush());
      assert.deepEqual(got, events, `crlf ${crlf}, round ${round}`);
    }
  }
});

test('a stream that turns to \\r\\n after its first events, and a blank line cut between chunks', () => {
  const decoder = new SseDecoder();
  assert.deepEqual(decoder.push('data: 1\n'), []);
  assert.deepEqual(decoder.push('\ndata: 2\r\n'), [{ event: undefined, data: '1' }]);
  assert.deepEqual(decoder.push('\r'), []);
  assert.deepEqual(decoder.push('\ndata: 3\n\r\n'), [
    { event: undefined, data: '2' },
    { event: undefined, data: '3' },
  ]);
  assert.deepEqual(decoder.flush(), []);
});
