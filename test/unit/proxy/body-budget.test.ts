/**
 * Issue 22, item 4: the capture proxy (polar capture, polar serve) bounds the request bodies it holds
 * at once, over all calls, not only each body: 8 parallel 60 MB bodies took polar serve to about
 * 970 MB RSS. Past the budget a call is refused with 503 and `retry-after`, in the harness's error shape,
 * before its body is read; the budget is back once a call is over. Real requests on 127.0.0.1 (a body
 * held open half-sent keeps its share), against the vLLM stand-in.
 */
import assert from 'node:assert/strict';
import { type ClientRequest, request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { BodyBudget } from '../../../src/http/body.ts';
import { startProxy, type TestProxy } from '../../support/proxy-harness.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

const KIB = 1024;

interface Sent {
  req: ClientRequest;
  answer: Promise<{ status: number; retryAfter: string | undefined; body: string }>;
}

/** Starts a POST whose body is `bytes` long (declared, or chunked) and sends `first` bytes of it. */
function startPost(p: TestProxy, bytes: number, first: number, declared = true): Sent {
  const { port } = new URL(p.url);
  const req = request({
    host: '127.0.0.1',
    port,
    method: 'POST',
    path: '/v1/chat/completions',
    headers: {
      authorization: `Bearer ${p.key}`,
      'content-type': 'application/json',
      ...(declared ? { 'content-length': String(bytes) } : {}),
    },
  });
  const answer = new Promise<{ status: number; retryAfter: string | undefined; body: string }>(
    (resolve, reject) => {
      req.on('response', (res) => {
        let body = '';
        res.on('data', (d) => {
          body += d;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string, body }),
        );
      });
      req.on('error', reject);
    },
  );
  req.write(body(bytes).subarray(0, first));
  return { req, answer };
}

/** a chat request `bytes` long: a short prompt, padded to fit in a field no model reads */
function body(bytes: number): Buffer {
  const head = '{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"pad":"';
  const tail = '"}';
  return Buffer.from(head + 'x'.repeat(bytes - head.length - tail.length) + tail);
}

function finish(sent: Sent, bytes: number, from: number): void {
  sent.req.end(body(bytes).subarray(from));
}

/** resolves once the proxy holds `bytes` of bodies (the server's side of a request lags the client's) */
async function held(p: TestProxy, bytes: number): Promise<void> {
  const t0 = Date.now();
  while (p.proxy.bodies.bytes !== bytes) {
    if (Date.now() - t0 > 10_000) assert.equal(p.proxy.bodies.bytes, bytes, 'bytes held');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('a budget for the request bodies held at once', () => {
  let standin: Standin;
  let p: TestProxy;
  before(async () => {
    standin = await startStandin({ maxModelLen: 1_000_000 });
    // each body may be 1 MiB; together they may hold 1 MiB
    p = await startProxy({ url: standin.url }, { maxBodyBytes: 1024 * KIB, bodyBudgetBytes: 1024 * KIB });
  });
  after(async () => {
    await p.close();
    await standin.close();
  });

  test('a body that does not fit is refused with 503 and retry-after; the budget comes back', async () => {
    const a = startPost(p, 700 * KIB, 600 * KIB);
    // the half-sent body holds its declared length
    await held(p, 700 * KIB);
    // declared: refused before its body is read
    const b = startPost(p, 700 * KIB, 0);
    const refused = await b.answer;
    b.req.destroy();
    assert.equal(refused.status, 503);
    assert.equal(refused.retryAfter, '1');
    assert.match(refused.body, /"type":"server_error"/);
    assert.match(refused.body, /memory budget/);
    // chunked (no length): refused once what arrived does not fit
    const c = startPost(p, 500 * KIB, 400 * KIB, false);
    const cut = await c.answer;
    c.req.destroy();
    assert.equal(cut.status, 503);
    // the first call goes through, and gives its share back
    finish(a, 700 * KIB, 600 * KIB);
    assert.equal((await a.answer).status, 200);
    await held(p, 0);
    const d = startPost(p, 700 * KIB, 0);
    finish(d, 700 * KIB, 0);
    assert.equal((await d.answer).status, 200);
    await held(p, 0);
    // the refused calls are recorded, as overloaded
    const kinds = (await p.records()).map((r) => r.error?.kind ?? 'ok');
    assert.deepEqual(kinds.sort(), ['ok', 'ok', 'overloaded', 'overloaded']);
  });

  test('BodyBudget: claims add up to the budget, and release what they took', () => {
    const budget = new BodyBudget(100);
    const a = budget.claim();
    const b = budget.claim();
    assert.equal(a.take(60), true);
    assert.equal(b.take(50), false);
    assert.equal(b.take(40), true);
    assert.equal(budget.bytes, 100);
    a.release();
    a.release();
    assert.equal(budget.bytes, 40);
    assert.equal(a.take(60), true);
    b.release();
    a.release();
    assert.equal(budget.bytes, 0);
  });
});
