/** Reading a backend's SSE body: events come out whole whatever the network reads cut, characters too. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type BackendResponse, sseEvents } from '../../../src/backends/http.ts';

function response(chunks: Buffer[]): BackendResponse {
  return {
    ok: true,
    status: 200,
    headers: { get: () => 'text/event-stream' },
    body: {
      async *[Symbol.asyncIterator]() {
        yield* chunks;
      },
    },
    bytes: async () => Buffer.concat(chunks),
    text: async () => Buffer.concat(chunks).toString('utf8'),
    json: async () => JSON.parse(Buffer.concat(chunks).toString('utf8')),
  };
}

async function read(chunks: Buffer[]): Promise<string[]> {
  const out: string[] = [];
  for await (const event of sseEvents(response(chunks))) out.push(event.data);
  return out;
}

describe('sseEvents', () => {
  test('a character of 2, 3 or 4 bytes split between two reads at any byte is decoded whole', async () => {
    const datas = ['{"content":"é"}', '{"content":"€ and 😀"}', '[DONE]'];
    const bytes = Buffer.from(datas.map((d) => `data: ${d}\n\n`).join(''), 'utf8');
    for (let cut = 1; cut < bytes.length; cut++) {
      const got = await read([bytes.subarray(0, cut), bytes.subarray(cut)]);
      assert.deepEqual(got, datas, `cut at byte ${cut}`);
    }
    // one byte a read
    const single = await read([...bytes].map((b) => Buffer.from([b])));
    assert.deepEqual(single, datas);
  });

  test('bytes that are not UTF-8 become U+FFFD instead of failing the stream', async () => {
    const bad = Buffer.concat([
      Buffer.from('data: {"content":"a'),
      Buffer.from([0xff, 0xc3]),
      Buffer.from('"}\n\n'),
    ]);
    const got = await read([bad]);
    assert.equal(got.length, 1);
    assert.ok(got[0]!.startsWith('{"content":"a\ufffd'));
    assert.ok(got[0]!.endsWith('"}'));
  });

  test('an unterminated last event and a character cut off at the end of the body still come out', async () => {
    const got = await read([Buffer.from('data: one\n\ndata: two é'), Buffer.from([0xe2, 0x82])]);
    assert.deepEqual(got, ['one', 'two é\ufffd']);
  });
});
