/**
 * Issue 17, item 4, over real requests on 127.0.0.1: polar serve's admin API always needs its token (made
 * when none is given; a session's key is not it), a cap on open sessions, and idle sessions expire.
 */
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readCapture } from '../../../src/capture/reader.ts';
import type { CaptureRecord } from '../../../src/capture/record.ts';
import { type Served, type ServeOptions, startServe } from '../../../src/serve/serve.ts';
import { tempDir } from '../../support/temp.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

async function served(
  standin: Standin,
  extra: Partial<ServeOptions> = {},
): Promise<Served & { captures: string }> {
  const captures = tempDir('polar-serve-admin-');
  const s = await startServe({
    backend: { kind: 'vllm', url: standin.url, model: 'Qwen/Qwen3-4B' },
    port: 0,
    captures,
    ...extra,
  });
  return Object.assign(s, { captures });
}

const admin = async (
  s: Served,
  path: string,
  init: RequestInit = {},
  token: string | null = s.adminToken,
) => {
  const r = await fetch(`${s.url}${path}`, {
    ...init,
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
};
const open = (s: Served) => admin(s, '/sessions', { method: 'POST', body: '{}' });

describe('polar serve admin API', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin();
  });
  after(() => standin.close());

  test('a token is made when none is given; no token, a wrong one or a session key is 401', async () => {
    const s = await served(standin);
    try {
      assert.match(s.adminToken, /^polar-admin-.{20,}/);
      const a = await open(s);
      const b = await open(s);
      assert.equal(a.status, 201);
      const keyA = a.body.key as string;
      for (const token of [null, 'wrong', keyA, `${s.adminToken} `.trim().slice(0, -1)]) {
        assert.equal((await admin(s, '/status', {}, token)).status, 401, String(token));
        // the harness holding session A's key cannot close session B
        assert.equal((await admin(s, `/sessions/${b.body.id}`, { method: 'DELETE' }, token)).status, 401);
      }
      assert.equal((await admin(s, `/sessions/${b.body.id}`)).status, 200, 'B is still open');
      const given = await served(standin, { adminToken: 'my-token' });
      assert.equal(given.adminToken, 'my-token');
      assert.equal((await admin(given, '/status', {}, 'my-token')).status, 200);
      await given.close(1000);
    } finally {
      await s.close(1000);
    }
  });

  test('at most --max-sessions sessions are open; closing one makes room', async () => {
    const s = await served(standin, { maxSessions: 2 });
    try {
      const first = await open(s);
      assert.equal((await open(s)).status, 201);
      const third = await open(s);
      assert.equal(third.status, 429);
      assert.match((third.body.error as { message: string }).message, /--max-sessions/);
      assert.equal((await admin(s, `/sessions/${first.body.id}`, { method: 'DELETE' })).status, 200);
      assert.equal((await open(s)).status, 201);
      assert.equal((await admin(s, '/status')).body.sessions, 2);
    } finally {
      await s.close(1000);
    }
  });

  test('an idle session is closed as timeout; its key stops working', async () => {
    const s = await served(standin, { sessionIdleTimeoutMs: 200 });
    try {
      const { body } = await open(s);
      const key = body.key as string;
      const call = await fetch(`${s.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(call.status, 200);
      await call.text();
      // (GET /sessions lists without touching a session's activity)
      while (((await admin(s, '/sessions')).body.sessions as unknown[]).length > 0)
        await new Promise((r) => setTimeout(r, 20));
      const late = await fetch(`${s.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: '{}',
      });
      assert.equal(late.status, 401);
      await late.text();
      const files = (await readdir(s.captures)).filter((f) => f.endsWith('.jsonl'));
      assert.equal(files.length, 1);
      const records: CaptureRecord[] = [];
      // the session_end is written once the close finished: wait for it
      for (;;) {
        records.length = 0;
        for await (const { record } of readCapture(join(s.captures, files[0]!))) records.push(record);
        if (records.at(-1)?.type === 'session_end') break;
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.deepEqual(
        records.map((r) => r.type),
        ['session', 'call', 'session_end'],
      );
      const end = records.at(-1) as Extract<CaptureRecord, { type: 'session_end' }>;
      assert.equal(end.status, 'timeout');
      assert.equal(end.calls, 1);
    } finally {
      await s.close(1000);
    }
  });
});
