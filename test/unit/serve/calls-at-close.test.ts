/**
 * Issue 22, items 2 and 6, over real requests on 127.0.0.1 against `polar serve` and the vLLM stand-in
 * streaming slowly (one chunk every few seconds):
 * - closing a session (DELETE /sessions/:id) waits for a call still streaming, bounded by the call
 *   deadline, instead of 30 s after which the record was lost ("capture file is closed") and
 *   session_end said `calls: 0`; `wait_s` cuts the calls still running after it, recorded as `cut`;
 *   polar shutting down cuts them too (it used to record them as the harness's hang-up);
 * - a harness that hangs up is `client_closed` (499), counted apart from errors, never a backend
 *   failure (it was `backend_unreachable` / 502).
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { readCapture } from '../../../src/capture/reader.ts';
import type { CallRecord, CaptureRecord, SessionEndRecord } from '../../../src/capture/record.ts';
import { type Served, startServe } from '../../../src/serve/serve.ts';
import { buildTrajectories } from '../../../src/trajectory/build.ts';
import { tempDir } from '../../support/temp.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

async function served(standin: Standin): Promise<Served> {
  const captures = tempDir('polar-serve-close-');
  return startServe({
    backend: { kind: 'vllm', url: standin.url, model: 'Qwen/Qwen3-4B', skipCheck: true },
    port: 0,
    captures,
  });
}

const admin = (s: Served, path: string, init: RequestInit = {}) =>
  fetch(`${s.url}${path}`, { ...init, headers: { authorization: `Bearer ${s.adminToken}` } });

async function open(s: Served): Promise<{ id: string; key: string; capture: string }> {
  return (await (await admin(s, '/sessions', { method: 'POST', body: '{}' })).json()) as {
    id: string;
    key: string;
    capture: string;
  };
}

/** A streamed call; resolves with what the harness got, or how its fetch ended. */
function streamCall(s: Served, key: string, signal?: AbortSignal): Promise<string> {
  return fetch(`${s.url}/v1/chat/completions`, {
    method: 'POST',
    ...(signal ? { signal } : {}),
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'm',
      stream: true,
      messages: [{ role: 'user', content: 'tell me a long story' }],
    }),
  }).then(
    async (r) => `${r.status} ${await r.text()}`,
    (e: Error) => `failed: ${e.message}`,
  );
}

async function records(file: string): Promise<{ calls: CallRecord[]; end: SessionEndRecord }> {
  const all: CaptureRecord[] = [];
  for await (const { record } of readCapture(file)) all.push(record);
  const end = all.at(-1);
  assert.equal(end?.type, 'session_end');
  return {
    calls: all.filter((r): r is CallRecord => r.type === 'call'),
    end: end as SessionEndRecord,
  };
}

/** Resolves once `ready()` holds (checked every 20 ms); fails naming `what` after 30 s. */
async function until(what: string, ready: () => boolean): Promise<void> {
  for (const t0 = Date.now(); !ready(); await new Promise((r) => setTimeout(r, 20)))
    if (Date.now() - t0 > 30_000) throw new Error(`waited 30 s for ${what}`);
}

/** Starts a streamed call and resolves once the stand-in is answering it (the call is in flight). */
async function inFlight(standin: Standin, start: () => Promise<string>): Promise<{ call: Promise<string> }> {
  const seen = standin.calls.length;
  const call = start();
  await until('the backend to answer the call', () => standin.calls.length > seen);
  return { call };
}

/** The call records in a capture file so far. */
const callLines = (file: string): number =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.includes('"type":"call"')).length
    : 0;

describe('calls in flight when a session closes, and harnesses that hang up', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin();
  });
  after(() => standin.close());

  test('DELETE waits for a call streaming longer than 30 s, and records it', async () => {
    const s = await served(standin);
    try {
      const session = await open(s);
      // about a dozen chunks, 3.2 s apart: the stream outlives the 30 s the close used to wait
      standin.faults.push({ chunkDelayMs: 3200 });
      const t0 = Date.now();
      const { call } = await inFlight(standin, () => streamCall(s, session.key));
      const closed = await admin(s, `/sessions/${session.id}`, { method: 'DELETE' });
      assert.equal(closed.status, 200);
      const got = await call;
      assert.ok(Date.now() - t0 > 31_000, `the stream lasted ${Date.now() - t0} ms`);
      assert.match(got, /^200 [\s\S]*data: \[DONE\]/);
      const { calls, end } = await records(session.capture);
      assert.equal(calls.length, 1, 'the call is in the capture');
      assert.equal(calls[0]!.error, null);
      assert.ok(calls[0]!.completion_token_ids!.length > 5);
      assert.equal(end.calls, 1);
      assert.equal(end.lost_calls, 0);
      assert.equal(end.status, 'completed');
    } finally {
      await s.close(1000);
    }
  });

  test('DELETE ?wait_s= cuts the calls still running after it: recorded as cut', async () => {
    const s = await served(standin);
    try {
      const session = await open(s);
      standin.faults.push({ chunkDelayMs: 1000 });
      const { call } = await inFlight(standin, () => streamCall(s, session.key));
      const closed = await admin(s, `/sessions/${session.id}?wait_s=0.5`, { method: 'DELETE' });
      assert.equal(closed.status, 200);
      const body = (await closed.json()) as Record<string, unknown>;
      assert.equal(body.cut_calls, 1);
      assert.doesNotMatch(await call, /data: \[DONE\]/, 'the harness got a cut stream');
      const { calls, end } = await records(session.capture);
      assert.equal(calls.length, 1);
      assert.equal(calls[0]!.error?.kind, 'cut');
      assert.equal(calls[0]!.error?.status, 503);
      assert.deepEqual(
        [end.calls, end.errors, end.cut_calls, end.client_closed, end.lost_calls],
        [1, 0, 1, 0, 0],
      );
      const bad = await admin(s, `/sessions/${(await open(s)).id}?wait_s=soon`, { method: 'DELETE' });
      assert.equal(bad.status, 400);
    } finally {
      await s.close(1000);
    }
  });

  test('polar serve shutting down cuts the calls still running (not a hang-up of the harness)', async () => {
    const s = await served(standin);
    const session = await open(s);
    standin.faults.push({ chunkDelayMs: 1000 });
    const { call } = await inFlight(standin, () => streamCall(s, session.key));
    await s.close(300);
    await call;
    const { calls, end } = await records(session.capture);
    assert.equal(calls[0]!.error?.kind, 'cut');
    assert.equal(end.status, 'interrupted');
    assert.deepEqual([end.calls, end.errors, end.cut_calls, end.client_closed], [1, 0, 1, 0]);
  });

  test('a harness hanging up is client_closed (499), before or during the stream, counted apart', async () => {
    const s = await served(standin);
    try {
      const session = await open(s);
      // before any output (the first token comes 1.5 s after the headers of the backend's answer)
      standin.faults.push({ chunkDelayMs: 1500 });
      const early = new AbortController();
      const { call: first } = await inFlight(standin, () => streamCall(s, session.key, early.signal));
      early.abort();
      assert.match(await first, /^failed/);
      // mid-stream: the harness has the headers and some tokens
      standin.faults.push({ chunkDelayMs: 400 });
      const late = new AbortController();
      const second = fetch(`${s.url}/v1/chat/completions`, {
        method: 'POST',
        signal: late.signal,
        headers: { authorization: `Bearer ${session.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'again' }] }),
      });
      const res = await second;
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      await reader.read();
      late.abort();
      await reader.read().catch(() => {});
      // both hang-ups recorded before the session closes
      await until('the second call record', () => callLines(session.capture) >= 2);
      await admin(s, `/sessions/${session.id}`, { method: 'DELETE' });
      const { calls, end } = await records(session.capture);
      assert.equal(calls.length, 2);
      for (const c of calls) {
        assert.equal(c.error?.kind, 'client_closed', JSON.stringify(c.error));
        assert.equal(c.error?.status, 499);
      }
      const before = calls.find((c) => c.response.status !== 200)!;
      assert.deepEqual(before.response, { status: 499, body: null }, 'nothing reached the harness');
      assert.deepEqual([end.calls, end.errors, end.client_closed, end.cut_calls], [2, 0, 2, 0]);
      // polar build counts them apart from failed calls
      const sink = new Writable({ write: (_c, _e, cb) => cb() });
      const stats = await buildTrajectories({ inputs: [session.capture], output: sink });
      assert.equal(stats.calls_skipped['call client_closed'], 2);
      assert.equal(stats.calls_skipped['call error'], undefined);
    } finally {
      await s.close(1000);
    }
  });
});
