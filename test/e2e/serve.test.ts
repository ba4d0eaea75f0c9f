/**
 * `polar serve` as a process: sessions over the admin API, 64 concurrent sessions with streaming calls
 * (none lost, every capture complete), backpressure visible in /status, SIGTERM mid-load loses no
 * finished call.
 */
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { connect, createServer, type Server as NetServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { ResultPromise } from 'execa';
import { readCapture } from '../../src/capture/reader.ts';
import type { CaptureRecord } from '../../src/capture/record.ts';
import { privateDirs } from '../support/capture-run.ts';
import { closedPort, startPolar } from '../support/cli.ts';
import { type Standin, startStandin } from '../support/vllm-standin.ts';

interface Server {
  url: string;
  captures: string;
  child: ResultPromise;
}

/** every server here gets this admin token; json() sends it (the admin API always needs one) */
const ADMIN_TOKEN = 'polar-e2e-admin-token';

async function serve(
  backendUrl: string,
  extra: string[] = [],
  options: { adminToken?: boolean } = {},
): Promise<Server & { line: Record<string, unknown> }> {
  const { workdir } = await privateDirs();
  const captures = join(workdir, 'captures');
  const child = startPolar(
    [
      'serve',
      '--port',
      '0',
      '--captures',
      captures,
      '--backend',
      'vllm',
      '--backend-url',
      backendUrl,
      '--model',
      'Qwen/Qwen3-4B',
      ...(options.adminToken === false ? [] : ['--admin-token', ADMIN_TOKEN]),
      ...extra,
    ],
    { cwd: workdir },
  );
  const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const line = buf.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve(JSON.parse(line) as Record<string, unknown>);
    });
    child.once('exit', () => reject(new Error('polar serve exited before listening')));
  });
  return { url: line.url as string, captures, child, line };
}

async function json(
  url: string,
  init: RequestInit = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(url, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(init.headers as Record<string, string>) },
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

async function chat(url: string, key: string, text: string): Promise<boolean> {
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: text }] }),
  });
  return r.status === 200 && (await r.text()).includes('[DONE]');
}

async function captures(dir: string): Promise<CaptureRecord[][]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.jsonl'));
  const out: CaptureRecord[][] = [];
  for (const f of files) {
    const records: CaptureRecord[] = [];
    for await (const { record } of readCapture(join(dir, f))) records.push(record);
    out.push(records);
  }
  return out;
}

describe('polar serve', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin();
  });
  after(() => standin.close());

  test('without --admin-token polar serve makes one and prints it; the admin API needs it', async () => {
    const s = await serve(standin.url, [], { adminToken: false });
    try {
      const token = s.line.admin_token as string;
      assert.match(token, /^polar-admin-/);
      assert.equal((await fetch(`${s.url}/status`)).status, 401);
      const ok = await fetch(`${s.url}/status`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(ok.status, 200);
    } finally {
      s.child.kill('SIGTERM');
      await s.child;
    }
  });

  test('admin API: create, use, inspect, close a session; bad requests get clear errors', async () => {
    const s = await serve(standin.url);
    try {
      const created = await json(`${s.url}/sessions`, {
        method: 'POST',
        body: JSON.stringify({
          harness: 'pi',
          task_id: 't1',
          sample: 0,
          harness_options: { api: 'openai-responses' },
        }),
      });
      assert.equal(created.status, 201);
      const { id, key, env, files } = created.body as {
        id: string;
        key: string;
        env: Record<string, string>;
        files: Array<{ path: string; content: string }>;
      };
      assert.match(id, /^sess_/);
      assert.equal(env.POLAR_API_KEY, key);
      assert.ok(env.PI_CODING_AGENT_DIR);
      assert.ok(
        files.some(
          (f) =>
            f.path.endsWith('models.json') &&
            JSON.parse(f.content).providers.polar.api === 'openai-responses',
        ),
      );
      assert.equal(await chat(s.url, key, 'hi'), true);
      const got = await json(`${s.url}/sessions/${id}`);
      assert.equal(got.body.calls, 1);
      const status = await json(`${s.url}/status`);
      assert.equal(status.body.sessions, 1);
      const closed = await json(`${s.url}/sessions/${id}?exit_code=0`, { method: 'DELETE' });
      assert.equal(closed.status, 200);
      assert.equal((await json(`${s.url}/sessions/${id}`)).status, 404);
      // the key stops working with its session
      const late = await fetch(`${s.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: '{}',
      });
      assert.equal(late.status, 401);
      const bad = await json(`${s.url}/sessions`, {
        method: 'POST',
        body: JSON.stringify({ harness: 'aider' }),
      });
      assert.equal(bad.status, 400);
      assert.match(String((bad.body.error as { message: string }).message), /harness/);
      const [records] = await captures(s.captures);
      assert.deepEqual(
        records!.map((r) => r.type),
        ['session', 'call', 'session_end'],
      );
      const session = records![0] as Extract<CaptureRecord, { type: 'session' }>;
      assert.equal(session.task_id, 't1');
      assert.equal((records![2] as Extract<CaptureRecord, { type: 'session_end' }>).status, 'completed');
    } finally {
      s.child.kill('SIGTERM');
      await s.child;
    }
  });

  test('64 concurrent sessions with streaming calls: none lost, every capture complete, queue visible', async () => {
    const s = await serve(standin.url, ['--max-inflight', '4']);
    try {
      let maxQueued = 0;
      let polling = true;
      const poller = (async () => {
        while (polling) {
          const st = await json(`${s.url}/status`);
          maxQueued = Math.max(maxQueued, (st.body.backend as { queued: number }).queued);
          await new Promise((r) => setTimeout(r, 5));
        }
      })();
      const n = 64;
      const callsEach = 3;
      const results = await Promise.all(
        Array.from({ length: n }, async (_, i) => {
          const { body } = await json(`${s.url}/sessions`, {
            method: 'POST',
            body: JSON.stringify({ task_id: `task-${i}` }),
          });
          const key = body.key as string;
          const ok = await Promise.all(
            Array.from({ length: callsEach }, (_, j) => chat(s.url, key, `session ${i} call ${j}`)),
          );
          await json(`${s.url}/sessions/${body.id}?exit_code=0`, { method: 'DELETE' });
          return ok.every(Boolean);
        }),
      );
      polling = false;
      await poller;
      assert.ok(results.every(Boolean), 'every streaming call finished');
      assert.ok(maxQueued > 0, 'with --max-inflight 4 and 192 calls, some waited in the queue');
      const all = await captures(s.captures);
      assert.equal(all.length, n);
      for (const records of all) {
        assert.deepEqual(
          records.map((r) => r.type),
          ['session', 'call', 'call', 'call', 'session_end'],
        );
        for (const r of records) if (r.type === 'call') assert.equal(r.token_exact, true);
      }
    } finally {
      s.child.kill('SIGTERM');
      await s.child;
    }
  });

  test('SIGTERM mid-load: every call a client saw finish is in the captures, and serve exits 0', async () => {
    const s = await serve(standin.url, ['--max-inflight', '2']);
    const finished: string[] = [];
    const sessions = await Promise.all(
      Array.from(
        { length: 16 },
        async () =>
          (await json(`${s.url}/sessions`, { method: 'POST', body: '{}' })).body as {
            id: string;
            key: string;
          },
      ),
    );
    const load = Promise.all(
      sessions.map(async ({ key }, i) => {
        for (let j = 0; j < 20; j++) {
          const text = `s${i}c${j}`;
          try {
            if (await chat(s.url, key, text)) finished.push(text);
            else return;
          } catch {
            return;
          }
        }
      }),
    );
    while (finished.length < 10) await new Promise((r) => setTimeout(r, 10));
    s.child.kill('SIGTERM');
    const result = await s.child;
    await load;
    assert.equal(result.exitCode, 0, String(result.stderr));
    const recorded = new Set<string>();
    for (const records of await captures(s.captures)) {
      assert.equal(records.at(-1)!.type, 'session_end', 'every capture is closed');
      assert.equal((records.at(-1) as Extract<CaptureRecord, { type: 'session_end' }>).status, 'interrupted');
      for (const r of records) {
        if (r.type !== 'call' || r.error) continue;
        const m = /s\d+c\d+/.exec(JSON.stringify(r.canonical_request));
        if (m) recorded.add(m[0]);
      }
    }
    for (const text of finished) assert.ok(recorded.has(text), `finished call ${text} is in a capture`);
  });
  test('failed backend calls release their slots: --max-inflight 2, every call refused, then one gets through', async () => {
    // a port nothing listens on: every backend call is refused (ECONNREFUSED -> 502)
    const port = await closedPort();
    // --skip-backend-check: the down server is the test (the set-up probe would wait for it)
    const s = await serve(`http://127.0.0.1:${port}/v1`, ['--max-inflight', '2', '--skip-backend-check']);
    let relay: NetServer | undefined;
    try {
      const { key } = (await json(`${s.url}/sessions`, { method: 'POST', body: '{}' })).body as {
        key: string;
      };
      // streamed and buffered calls, more than the two slots: before the fix the third one hung for ever
      for (let i = 0; i < 5; i++) {
        const r = await fetch(`${s.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'm',
            stream: i % 2 === 0,
            messages: [{ role: 'user', content: `x${i}` }],
          }),
          signal: AbortSignal.timeout(60_000),
        });
        assert.equal(r.status, 502, `call ${i} fails as unreachable`);
        await r.text();
      }
      let status = (await json(`${s.url}/status`)).body.backend as { inflight: number; queued: number };
      assert.equal(status.inflight, 0);
      assert.equal(status.queued, 0);
      // the backend comes up on that port (a TCP relay to the stand-in): the next call succeeds
      relay = await relayTo(port, new URL(standin.url).port);
      assert.equal(await chat(s.url, key, 'after the failures'), true);
      status = (await json(`${s.url}/status`)).body.backend as { inflight: number; queued: number };
      assert.equal(status.inflight, 0);
    } finally {
      s.child.kill('SIGTERM');
      await s.child;
      await new Promise((r) => (relay ? relay.close(r) : r(undefined)));
    }
  });
});

/** a TCP relay on 127.0.0.1:port to the stand-in's port */
async function relayTo(port: number, target: string): Promise<NetServer> {
  const relay = createServer((socket) => {
    const upstream = connect(Number(target), '127.0.0.1');
    socket.pipe(upstream).pipe(socket);
    const drop = () => {
      socket.destroy();
      upstream.destroy();
    };
    socket.on('error', drop);
    upstream.on('error', drop);
  });
  await new Promise<void>((r) => relay.listen(port, '127.0.0.1', r));
  return relay;
}
