/** Bad input and backend faults: each gets its API's own error shape and status, and an error record. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeSse } from '../../../src/protocols/sse.ts';
import { closedUrl } from '../../support/cli.ts';
import { post, startProxy, type TestProxy } from '../../support/proxy-harness.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

const chatBody = (stream = false) => ({ model: 'x', stream, messages: [{ role: 'user', content: 'hi' }] });
const anthropicBody = { model: 'x', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
const responsesBody = { model: 'x', input: 'hi' };

describe('proxy faults', () => {
  let standin: Standin;
  let p: TestProxy;
  const auth = () => ({ authorization: `Bearer ${p.key}` });

  before(async () => {
    standin = await startStandin();
    p = await startProxy({ url: standin.url }, { maxBodyBytes: 64 * 1024 });
  });
  after(async () => {
    await p.close();
    await standin.close();
  });

  test('no key or a wrong key: 401 in the API shape, nothing recorded', async () => {
    const before = (await p.records()).length;
    const r1 = await post(p.url, '/v1/chat/completions', chatBody());
    assert.equal(r1.status, 401);
    assert.equal(((await r1.json()) as { error: { type: string } }).error.type, 'authentication_error');
    const r2 = await post(p.url, '/v1/messages', anthropicBody, {
      'x-api-key': 'wrong',
      'anthropic-version': '2023-06-01',
    });
    assert.equal(r2.status, 401);
    const b2 = (await r2.json()) as { type: string; error: { type: string } };
    assert.equal(b2.type, 'error');
    assert.equal(b2.error.type, 'authentication_error');
    assert.equal((await p.records()).length, before);
    assert.ok(p.proxy.unauthorized >= 2);
  });

  test('malformed JSON: 400 invalid_request_error and an error record', async () => {
    const r = await post(p.url, '/v1/chat/completions', '{"model": ', auth());
    assert.equal(r.status, 400);
    const body = (await r.json()) as { error: { type: string; message: string } };
    assert.equal(body.error.type, 'invalid_request_error');
    assert.match(body.error.message, /not valid JSON/);
    const rec = (await p.records()).at(-1)!;
    assert.equal(rec.error?.kind, 'invalid_request');
    assert.equal(rec.response.status, 400);
  });

  test('schema-invalid body names the field (anthropic shape)', async () => {
    const r = await post(
      p.url,
      '/v1/messages',
      { model: 'x', messages: 'nope' },
      { ...auth(), 'anthropic-version': '2023-06-01' },
    );
    assert.equal(r.status, 400);
    const body = (await r.json()) as { type: string; error: { type: string; message: string } };
    assert.equal(body.error.type, 'invalid_request_error');
    assert.match(body.error.message, /messages/);
  });

  test('unknown path: 404 in the API shape', async () => {
    const r = await post(p.url, '/v1/embeddings', { input: 'x' }, auth());
    assert.equal(r.status, 404);
    assert.equal(((await r.json()) as { error: { type: string } }).error.type, 'not_found_error');
  });

  test('body over the limit: 413', async () => {
    const big = { ...chatBody(), messages: [{ role: 'user', content: 'x'.repeat(100 * 1024) }] };
    const r = await post(p.url, '/v1/chat/completions', big, auth());
    assert.equal(r.status, 413);
    const rec = (await p.records()).at(-1)!;
    assert.equal(rec.error?.kind, 'too_large');
  });

  test('backend 5xx: 502 with the upstream status named, per API', async () => {
    standin.faults.push({ status: 503 }, { status: 500 }, { status: 500 });
    const r1 = await post(p.url, '/v1/chat/completions', chatBody(true), auth());
    assert.equal(r1.status, 502);
    assert.match(((await r1.json()) as { error: { message: string } }).error.message, /503/);
    const r2 = await post(p.url, '/v1/messages', { ...anthropicBody, stream: true }, auth());
    assert.equal(r2.status, 502);
    assert.equal(((await r2.json()) as { error: { type: string } }).error.type, 'api_error');
    const r3 = await post(p.url, '/v1/responses', { ...responsesBody, stream: true }, auth());
    assert.equal(r3.status, 502);
    const rec = (await p.records()).at(-1)!;
    assert.equal(rec.error?.kind, 'backend_error');
    assert.equal(rec.api, 'openai-responses');
  });

  test('backend without token ids when they are required: 502 backend_no_token_ids', async () => {
    standin.faults.push({ noTokenIds: true });
    const r = await post(p.url, '/v1/chat/completions', chatBody(true), auth());
    assert.equal(r.status, 502);
    assert.match(((await r.json()) as { error: { message: string } }).error.message, /token ids/);
    const rec = (await p.records()).at(-1)!;
    assert.equal(rec.error?.kind, 'backend_no_token_ids');
    assert.equal(rec.token_exact, false);
  });

  test('backend timeout: 504', async () => {
    standin.faults.push({ hang: true });
    const r = await post(p.url, '/v1/chat/completions', chatBody(), auth());
    assert.equal(r.status, 504);
    const rec = (await p.records()).at(-1)!;
    assert.equal(rec.error?.kind, 'backend_timeout');
  });

  test('backend connection reset mid-request: 502, proxy keeps serving', async () => {
    standin.faults.push({ reset: true });
    const r = await post(p.url, '/v1/chat/completions', chatBody(true), auth());
    assert.equal(r.status, 502);
    const ok = await post(p.url, '/v1/chat/completions', chatBody(), auth());
    assert.equal(ok.status, 200);
  });

  test('backend refused (nothing listening): 502 backend_unreachable', async () => {
    const q = await startProxy({ url: await closedUrl() });
    try {
      const r = await post(
        q.url,
        '/v1/responses',
        { ...responsesBody, stream: true },
        { authorization: `Bearer ${q.key}` },
      );
      assert.equal(r.status, 502);
      const body = (await r.json()) as { error: { message: string } };
      assert.match(body.error.message, /unreachable/);
      assert.equal((await q.records()).at(-1)!.error?.kind, 'backend_unreachable');
    } finally {
      await q.close();
    }
  });

  test('after all faults the capture is valid JSONL and a good call still works, token-exact', async () => {
    const r = await post(p.url, '/v1/chat/completions', chatBody(true), auth());
    assert.equal(r.status, 200);
    const events = decodeSse(await r.text());
    assert.equal(events.at(-1)?.data, '[DONE]');
    const records = await p.records(); // validates every line
    const last = records.at(-1)!;
    assert.equal(last.error, null);
    assert.equal(last.token_exact, true);
    assert.deepEqual(last.completion_token_ids, standin.calls.at(-1)!.completionIds);
    const seqs = records.map((x) => x.seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
      'seq increases',
    );
  });
});
