/**
 * Issue 17, item 1: a failed backend call releases its in-flight slot on every path (an error before the
 * first token, a backend timeout, a harness that hangs up before the first token). With one slot, the
 * call after each failure gets through only if the failed one let go of it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LimitedBackend } from '../../../src/proxy/limits.ts';
import { post, startProxy, type TestProxy } from '../../support/proxy-harness.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

const chat = (stream: boolean) => ({ model: 'x', stream, messages: [{ role: 'user', content: 'hi' }] });

describe('in-flight slots', () => {
  let standin: Standin;
  let p: TestProxy;
  let limit: LimitedBackend['limit'];
  const auth = () => ({ authorization: `Bearer ${p.key}` });
  const succeeds = async () => {
    const r = await post(p.url, '/v1/chat/completions', chat(true), auth());
    assert.equal(r.status, 200);
    assert.match(await r.text(), /\[DONE\]/);
    assert.equal(limit.inflight, 0);
  };

  before(async () => {
    standin = await startStandin();
    p = await startProxy({ url: standin.url }, { maxInflight: 1 });
    limit = (p.session.backend as LimitedBackend).limit;
  });
  after(async () => {
    await p.close();
    await standin.close();
  });

  test('backend errors before any output (streamed and not): each slot comes back', async () => {
    for (const stream of [true, false, true]) {
      standin.faults.push({ status: 500 });
      const r = await post(p.url, '/v1/chat/completions', chat(stream), auth());
      assert.equal(r.status, 502);
      await r.text();
      assert.equal(limit.inflight, 0, `stream=${stream}`);
    }
    await succeeds();
  });

  test('backend timeout (504): the slot comes back', async () => {
    standin.faults.push({ hang: true });
    const r = await post(p.url, '/v1/chat/completions', chat(false), auth());
    assert.equal(r.status, 504);
    await r.text();
    await succeeds();
  });

  test('a harness that hangs up before the first token: the slot comes back', async () => {
    standin.faults.push({ hang: true });
    const controller = new AbortController();
    const call = post(p.url, '/v1/chat/completions', chat(true), auth(), controller.signal);
    while (limit.inflight === 0) await new Promise((r) => setTimeout(r, 5));
    controller.abort();
    await assert.rejects(call);
    while (limit.inflight > 0) await new Promise((r) => setTimeout(r, 5));
    await succeeds();
    const records = await p.records();
    // the hung-up call is recorded as failed, with the reason
    assert.ok(records.some((r) => /harness closed the connection/.test(r.error?.message ?? '')));
  });
});
