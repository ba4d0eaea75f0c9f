/** The harness's request body goes into the record as it arrived (or re-serialised when it must be). */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { post, startProxy, type TestProxy } from '../../support/proxy-harness.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

describe('request bodies in call records', () => {
  let standin: Standin;
  let p: TestProxy;
  before(async () => {
    standin = await startStandin();
    p = await startProxy({ url: standin.url });
  });
  after(async () => {
    await p.close();
    await standin.close();
  });
  const auth = () => ({ authorization: `Bearer ${p.key}` });

  test('a compact body is kept byte for byte, including non-ASCII text', async () => {
    const text = '{"model":"m","messages":[{"role":"user","content":"héllo ✓ 漢字"}],  "stream":false}';
    assert.equal((await post(p.url, '/v1/chat/completions', text, auth())).status, 200);
    const lines = (await readFile(p.file, 'utf8')).trim().split('\n');
    assert.ok(lines.at(-1)!.includes(text), 'the raw body text is inside the record line');
    const rec = (await p.records()).at(-1)!;
    assert.deepEqual(rec.request.body, JSON.parse(text));
  });

  test('a pretty-printed body (newlines) is re-serialised so the record stays one line', async () => {
    const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
    assert.equal(
      (await post(p.url, '/v1/chat/completions', JSON.stringify(body, null, 2), auth())).status,
      200,
    );
    const rec = (await p.records()).at(-1)!; // parses: one valid line
    assert.deepEqual(rec.request.body, body);
  });

  test('a body that contains the session key is scrubbed', async () => {
    const body = { model: 'm', messages: [{ role: 'user', content: `my key is ${p.key}` }] };
    assert.equal((await post(p.url, '/v1/chat/completions', body, auth())).status, 200);
    const text = await readFile(p.file, 'utf8');
    assert.ok(!text.includes(p.key), 'the key appears nowhere in the capture');
    const rec = (await p.records()).at(-1)!;
    assert.match(JSON.stringify(rec.request.body), /my key is <redacted>/);
  });
});
