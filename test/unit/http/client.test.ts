import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Deadline, request, timeLimit } from '../../../src/http/client.ts';

const received: { length: string | undefined; body: string }[] = [];
const server = createServer(async (req: IncomingMessage, res) => {
  if (req.url === '/slow') {
    // a body that starts and then stalls until the client stops it (or ends late: the test then fails)
    res.writeHead(200);
    res.write('first');
    const late = setTimeout(() => res.end('late'), 20_000);
    req.socket.once('close', () => clearTimeout(late));
    return;
  }
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

test('a deadline stops a request before, and its body while, it is read; after, the connection is left alone', async () => {
  const base = url.replace(/\/x$/, '');
  // already aborted: rejected with the reason, nothing sent
  const gone = new AbortController();
  gone.abort(new Error('harness left'));
  const early = new Deadline(10_000, 0, gone.signal);
  await assert.rejects(request(url, { method: 'POST', body: '{}', deadline: early }), /harness left/);
  early.dispose();
  // the body stalls: the parent's abort ends the read with its reason
  const parent = new AbortController();
  const deadline = new Deadline(10_000, 0, parent.signal);
  const res = await request(`${base}/slow`, { method: 'POST', body: '{}', deadline });
  const read = (async () => {
    for await (const _ of res.body) parent.abort(new Error('stopped mid-body'));
  })();
  await assert.rejects(read, /stopped mid-body/);
  deadline.dispose();
  // a request that is over: aborting its deadline later does not reach the (kept-alive) connection
  const done = new AbortController();
  const over = new Deadline(10_000, 0, done.signal);
  const first = await request(url, { method: 'POST', body: '{"n":1}', deadline: over });
  assert.equal(await first.text(), 'ok');
  const second = await request(url, { method: 'POST', body: '{"n":2}', deadline: timeLimit(10_000) });
  const text = second.text();
  done.abort(new Error('late'));
  assert.equal(await text, 'ok');
  over.dispose();
});
