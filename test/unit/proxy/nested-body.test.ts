/**
 * Issue 17, item 6: a deeply nested request body never breaks recording. A body nested past polar's
 * bound is refused (400) and recorded; a record that cannot be serialised as it is gets written degraded;
 * in every case the file holds one record per call and the counters agree with it.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { newCounters } from '../../../src/capture/call-record.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../../src/util/json-depth.ts';
import { completedCall, startRecording } from '../../support/call-recording.ts';
import { post, startProxy, type TestProxy } from '../../support/proxy-harness.ts';
import { tempDir } from '../../support/temp.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

describe('deeply nested request bodies', () => {
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

  test('a body nested 20000 deep is refused with 400 and recorded; the next call is recorded too', async () => {
    const auth = { authorization: `Bearer ${p.key}` };
    const deep = `{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"x":${nested(20_000)}},"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","x":${nested(20_000)}}}}]}`;
    const r = await post(p.url, '/v1/chat/completions', deep, auth);
    assert.equal(r.status, 400);
    assert.match(await r.text(), new RegExp(`deeper than ${MAX_JSON_DEPTH} levels`));
    const ok = await post(
      p.url,
      '/v1/chat/completions',
      { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
      auth,
    );
    assert.equal(ok.status, 200);
    await ok.text();
    const records = await p.records();
    assert.equal(records.length, 2);
    assert.equal(records[0]!.error?.kind, 'invalid_request');
    assert.equal(typeof records[0]!.request.body, 'string', 'the body start is kept as text');
    assert.equal(p.counters.calls, 2);
    assert.equal(p.counters.errors, 1);
    assert.equal((await readFile(p.file, 'utf8')).trim().split('\n').length, 2);
  });

  test('a body just inside the bound goes through', async () => {
    const body = `{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"x":${nested(MAX_JSON_DEPTH - 2)}}}`;
    const r = await post(p.url, '/v1/chat/completions', body, { authorization: `Bearer ${p.key}` });
    assert.equal(r.status, 200);
    await r.text();
  });

  test('the depth scan skips brackets inside strings and honours escapes', () => {
    const enc = (s: string) => Buffer.from(s);
    assert.equal(nestsDeeperThan(enc('{"a":"[[[[[[\\"[[[["}'), 2), false);
    assert.equal(nestsDeeperThan(enc('[[[1]]]'), 2), true);
    assert.equal(nestsDeeperThan(enc('[[1],[2],[3]]'), 2), false);
    // a long string (the native jump to its quote) with escaped quotes and backslash runs past the jump
    const long = `${'a'.repeat(40)}\\\\\\"[[[${'b'.repeat(70)}\\\\`;
    assert.equal(nestsDeeperThan(enc(JSON.stringify({ a: long, b: [[1]] })), 3), false);
    assert.equal(nestsDeeperThan(enc(JSON.stringify({ a: long, b: [[[1]]] })), 3), true);
    assert.equal(nestsDeeperThan(enc(`["${'x'.repeat(50)}\\"[[[[`), 2), false, 'an unterminated string');
  });

  test('the depth scan agrees with a byte-by-byte scan on random JSON texts', () => {
    // the reference: every byte in turn, a backslash skipping the next
    const reference = (bytes: Uint8Array, max: number): boolean => {
      let depth = 0;
      let inString = false;
      for (let i = 0; i < bytes.length; i++) {
        const b = bytes[i]!;
        if (inString) {
          if (b === 0x5c) i++;
          else if (b === 0x22) inString = false;
        } else if (b === 0x22) inString = true;
        else if (b === 0x7b || b === 0x5b) {
          if (++depth > max) return true;
        } else if (b === 0x7d || b === 0x5d) depth--;
      }
      return false;
    };
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const pieces = ['a', 'bb', '"', '\\', '[', ']', '{', '}', 'x'.repeat(33), 'y'.repeat(100)];
    const text = (depth: number): unknown => {
      if (depth === 0 || rand(3) === 0) {
        let s = '';
        for (let k = rand(12); k > 0; k--) s += pieces[rand(pieces.length)];
        return s;
      }
      const items = Array.from({ length: 1 + rand(3) }, () => text(depth - 1));
      return rand(2) === 0 ? items : Object.fromEntries(items.map((v, k) => [`k${k}`, v]));
    };
    for (let n = 0; n < 2000; n++) {
      const bytes = Buffer.from(JSON.stringify(text(1 + rand(6))));
      for (const max of [1, 2, 3, 4]) assert.equal(nestsDeeperThan(bytes, max), reference(bytes, max));
    }
  });
});

describe('recording never throws into the call path', () => {
  test('a record too deep to serialise is written degraded, and session counters agree', async () => {
    const dir = tempDir('polar-nested-');
    const key = 'polar-key-abc';
    const { writer, counters, complete } = startRecording(join(dir, 'c.jsonl'), { key });
    let deep: unknown = [];
    for (let i = 0; i < 20_000; i++) deep = [deep];
    const call = completedCall('call_1', {
      request: {
        method: 'POST',
        path: '/v1/chat/completions',
        headers: {},
        body: { deep, note: key },
        raw: Buffer.from(`{"deep":"(text)","note":"${key}"}`),
      },
      canonicalRequest: { deep } as never,
    });
    assert.doesNotThrow(() => complete(call));
    // records are written off the response path (next event-loop turn); flush writes them now
    assert.doesNotThrow(() => complete.flush());
    writer.close();
    const text = await readFile(join(dir, 'c.jsonl'), 'utf8');
    const lines = text.trim().split('\n');
    assert.equal(lines.length, 1);
    const record = JSON.parse(lines[0]!);
    assert.equal(record.canonical_request, null);
    assert.match(record.warnings.join(' '), /record degraded/);
    assert.equal(typeof record.request.body, 'string');
    assert.ok(!text.includes(key), 'the session key is scrubbed from the degraded record');
    assert.deepEqual(counters, { ...newCounters(), seq: 1, calls: 1 });
  });
});
