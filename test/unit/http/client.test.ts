import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { request, timeLimit } from '../../../src/http/client.ts';

const received: { length: string | undefined; body: string }[] = [];
const server = createServer(async (req: IncomingMessage, res) => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  received.push({ length: req.headers['content-length'], body: Buffer.concat(chunks).toString('utf8') });
  res.end('ok');
});
let url = '';
before(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/x`;
});
after(() => server.close());

test('a body given as pieces arrives whole, its content-length the sum of their bytes', async () => {
  const pieces = [Buffer.from('{"a":"é'), Buffer.from('x'.repeat(70_000)), Buffer.from('😀"}')];
  for (const body of [pieces, Buffer.concat(pieces), Buffer.concat(pieces).toString('utf8')]) {
    const deadline = timeLimit(10_000);
    const res = await request(url, { method: 'POST', body, deadline, release: true });
    assert.equal(await res.text(), 'ok');
  }
  const expected = Buffer.concat(pieces).toString('utf8');
  assert.equal(received.length, 3);
  for (const r of received) {
    assert.equal(r.body, expected);
    assert.equal(r.length, String(Buffer.byteLength(expected)));
  }
});
