/**
 * readBody (src/http/body.ts) over real requests on 127.0.0.1: a body whole, sent in many pieces or
 * compressed (gzip, deflate, br); refused past the size limit or the memory budget, declared or found
 * while reading, with the connection still answering; an unknown encoding, broken compressed data and a
 * client that leaves mid-body are errors, never a crash and never a body.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { BodyBudget, readBody } from '../../../src/http/body.ts';

const LIMIT = 64 * 1024;

interface Sent {
  status: number;
  body: string;
}

describe('readBody', () => {
  let server: Server;
  let port: number;
  const budget = new BodyBudget(256 * 1024);
  /** what each request's read gave, in order */
  const outcomes: Array<{ kind: string; length?: number; text?: string }> = [];
  before(async () => {
    server = createServer(async (req: IncomingMessage, res) => {
      const claim = budget.claim();
      const read = await readBody(req, LIMIT, claim);
      claim.release();
      if ('error' in read) {
        outcomes.push({ kind: read.error.kind });
        res.writeHead(read.error.status, { 'content-type': 'text/plain' });
        res.end(read.error.message);
        return;
      }
      outcomes.push({ kind: 'ok', length: read.bytes.length, text: read.text });
      res.end(`read ${read.bytes.length}`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  /** POSTs `pieces` one write each (chunked when no length is declared) and reads the answer. */
  const post = (pieces: Buffer[], headers: Record<string, string | number> = {}): Promise<Sent> =>
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', headers }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          body += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      for (const piece of pieces) req.write(piece);
      req.end();
    });

  test('a body whole: in one piece, in many, declared or chunked', async () => {
    const text = 'é'.repeat(5000);
    const bytes = Buffer.from(text);
    assert.deepEqual(await post([bytes], { 'content-length': bytes.length }), {
      status: 200,
      body: `read ${bytes.length}`,
    });
    const pieces = Array.from({ length: 50 }, (_, i) => bytes.subarray(i * 200, (i + 1) * 200));
    assert.equal((await post(pieces)).status, 200);
    assert.equal(outcomes.at(-1)!.text, text, 'a character split between two pieces is whole');
    assert.equal(budget.bytes, 0);
  });

  test('gzip, deflate and br bodies are read decompressed', async () => {
    const text = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(20_000) }] });
    for (const [encoding, packed] of [
      ['gzip', gzipSync(text)],
      ['deflate', deflateSync(text)],
      ['br', brotliCompressSync(text)],
    ] as const) {
      const sent = await post([packed], { 'content-encoding': encoding, 'content-length': packed.length });
      assert.equal(sent.status, 200, encoding);
      assert.deepEqual(outcomes.at(-1), { kind: 'ok', length: text.length, text });
    }
  });

  test('past the limit: 413, declared (before reading) or found while reading; the connection answers', async () => {
    const big = Buffer.alloc(LIMIT + 1, 0x61);
    const declared = await post([big], { 'content-length': big.length });
    assert.equal(declared.status, 413);
    assert.match(declared.body, /request body of 65537 bytes is over the limit of 65536 bytes/);
    const pieces = Array.from({ length: 20 }, () => Buffer.alloc(8 * 1024, 0x61));
    const found = await post(pieces);
    assert.equal(found.status, 413);
    assert.match(found.body, /request body is over the limit of 65536 bytes/);
    // decompressed past the limit (a small gzip of a large body)
    const bomb = gzipSync(Buffer.alloc(10 * LIMIT, 0x61));
    const inflated = await post([bomb], { 'content-encoding': 'gzip', 'content-length': bomb.length });
    assert.equal(inflated.status, 413);
    assert.equal(budget.bytes, 0);
  });

  test('past the memory budget: 503, and the budget comes back', async () => {
    const held = budget.claim();
    assert.ok(held.take(250 * 1024));
    const sent = await post([Buffer.alloc(10 * 1024, 0x61)]);
    assert.equal(sent.status, 503);
    assert.match(sent.body, /memory budget/);
    held.release();
    assert.equal(budget.bytes, 0);
    assert.equal((await post([Buffer.alloc(10 * 1024, 0x61)])).status, 200);
  });

  test('an unknown encoding is 415; broken gzip is 400 unreadable', async () => {
    const zstd = await post([Buffer.from('abc')], { 'content-encoding': 'zstd', 'content-length': 3 });
    assert.equal(zstd.status, 415);
    const broken = Buffer.from('this is not gzip at all');
    const sent = await post([broken], { 'content-encoding': 'gzip', 'content-length': broken.length });
    assert.equal(sent.status, 400);
    assert.match(sent.body, /could not read the request body/);
    assert.equal(outcomes.at(-1)!.kind, 'unreadable');
  });

  test('a client that leaves mid-body: unreadable, and the server goes on', async () => {
    const before = outcomes.length;
    await new Promise<void>((resolve) => {
      const req = request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/',
        headers: { 'content-length': 10_000 },
      });
      req.on('error', () => resolve());
      req.write(Buffer.alloc(1000, 0x61), () => setTimeout(() => req.destroy(), 50));
      req.on('close', () => resolve());
    });
    for (let i = 0; i < 100 && outcomes.length === before; i++) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(outcomes.at(-1), { kind: 'unreadable' });
    assert.equal(budget.bytes, 0);
    assert.equal((await post([Buffer.from('still here')])).status, 200);
  });
});
