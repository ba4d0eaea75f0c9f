/**
 * Issue 17, item 5: a backend call's limits hold for the whole call, streaming included. A backend that
 * trickles (a byte now and then, never a finish), one that streams for ever, and one that stalls after
 * its first chunk each end in backend_timeout, and the slot comes back; an SSE event has a size bound.
 */
import assert from 'node:assert/strict';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { GeneratorFault, HttpCompletions } from '../../../src/backends/token-generator.ts';
import { SseDecoder, SseEventTooLarge } from '../../../src/protocols/sse.ts';
import type { LimitedBackend } from '../../../src/proxy/limits.ts';
import { post, startProxy, type TestProxy } from '../../support/proxy-harness.ts';

type Mode = 'trickle' | 'endless' | 'stall';

/** A misbehaving OpenAI-compatible server: the mode is the first word of the last user message. */
async function badBackend(): Promise<{ url: string; open: Set<ServerResponse>; close(): Promise<void> }> {
  const open = new Set<ServerResponse>();
  const timers = new Set<NodeJS.Timeout>();
  const server: Server = createServer(async (req, res) => {
    let text = '';
    for await (const c of req) text += c;
    const body = JSON.parse(text) as { messages?: { content?: string }[]; prompt?: unknown };
    const mode = (String(body.messages?.at(-1)?.content ?? 'stall').split(' ')[0] ?? 'stall') as Mode;
    open.add(res);
    res.on('close', () => open.delete(res));
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chunk = (content: string) =>
      `data: ${JSON.stringify({
        id: 'c',
        object: 'chat.completion.chunk',
        choices: [{ index: 0, delta: { content }, text: content, token_ids: [1], finish_reason: null }],
      })}\n\n`;
    res.write(chunk('hello'));
    if (mode === 'stall') return;
    const timer = setInterval(() => {
      if (res.destroyed) return clearInterval(timer);
      // trickle: a comment line now and then (bytes, never an event); endless: tokens for ever
      res.write(mode === 'trickle' ? ': still here\n' : chunk(' more'));
    }, 20);
    timers.add(timer);
    res.on('close', () => clearInterval(timer));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    open,
    async close() {
      for (const t of timers) clearInterval(t);
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

const chat = (mode: Mode, stream: boolean) => ({
  model: 'x',
  stream,
  messages: [{ role: 'user', content: `${mode} please` }],
});

describe('backend limits over the whole call', () => {
  let backend: Awaited<ReturnType<typeof badBackend>>;
  let total: TestProxy;
  let idle: TestProxy;
  before(async () => {
    backend = await badBackend();
    // total limit only (the idle limit far away), and idle limit only
    total = await startProxy(
      { kind: 'openai', url: backend.url, timeoutMs: 800, idleTimeoutMs: 600_000 },
      { maxInflight: 1 },
    );
    idle = await startProxy(
      { kind: 'openai', url: backend.url, timeoutMs: 600_000, idleTimeoutMs: 300 },
      { maxInflight: 1 },
    );
  });
  after(async () => {
    await total.close();
    await idle.close();
    await backend.close();
  });

  const run = async (p: TestProxy, mode: Mode, stream: boolean) => {
    const r = await post(p.url, '/v1/chat/completions', chat(mode, stream), {
      authorization: `Bearer ${p.key}`,
    });
    const text = await r.text();
    const record = (await p.records()).at(-1)!;
    assert.equal((p.session.backend as LimitedBackend).limit.inflight, 0, 'the slot came back');
    return { status: r.status, text, record };
  };

  for (const stream of [true, false]) {
    test(`a trickling backend ends at the total limit (stream: ${stream})`, async () => {
      const { status, text, record } = await run(total, 'trickle', stream);
      assert.equal(status, stream ? 200 : 504);
      assert.match(text, /did not finish within 800 ms/);
      assert.equal(record.error?.kind, 'backend_timeout');
    });

    test(`an endless stream ends at the total limit (stream: ${stream})`, async () => {
      const { status, record } = await run(total, 'endless', stream);
      assert.equal(status, stream ? 200 : 504);
      assert.equal(record.error?.kind, 'backend_timeout');
      assert.match(record.error?.message ?? '', /--backend-timeout/);
    });
  }

  test('a stream that stalls after its first chunk ends at the idle limit', async () => {
    const { status, text, record } = await run(idle, 'stall', true);
    assert.equal(status, 200);
    assert.match(text, /sent nothing for 300 ms/);
    assert.equal(record.error?.kind, 'backend_timeout');
    assert.match(record.error?.message ?? '', /--backend-idle-timeout/);
  });

  test('a trickle keeps the idle limit from firing; the backend connection is closed after the call', async () => {
    // the trickle sends bytes every 20 ms, so only the total limit could end it: with both far away
    // the call is ended by the harness instead, and the backend sees its connection closed
    const controller = new AbortController();
    const call = post(
      idle.url,
      '/v1/chat/completions',
      chat('trickle', true),
      {
        authorization: `Bearer ${idle.key}`,
      },
      controller.signal,
    );
    const r = await call;
    const reader = r.body!.getReader();
    await reader.read();
    controller.abort();
    await reader.closed.catch(() => {});
    while (backend.open.size > 0) await new Promise((res) => setTimeout(res, 10));
    while ((idle.session.backend as LimitedBackend).limit.inflight > 0)
      await new Promise((res) => setTimeout(res, 10));
  });

  test('the token generator (tokens backend) holds its limits over the stream too', async () => {
    const gen = new HttpCompletions('vllm', backend.url, 'm', { timeoutMs: 600_000, idleTimeoutMs: 300 });
    const recorder = { backendRequest() {}, tokens() {}, warn() {}, annotate() {} };
    const it = gen.generate(
      { promptIds: [1, 2], maxTokens: 10, temperature: 1, topP: 1, stopTokenIds: [] } as never,
      { signal: new AbortController().signal, recorder } as never,
    );
    // vLLM's /v1/completions stream: the stand-in answers every POST with a stalled stream
    await assert.rejects(
      (async () => {
        for (;;) if ((await it.next()).done) break;
      })(),
      (error: unknown) => error instanceof GeneratorFault && error.fault.kind === 'backend_timeout',
    );
  });
});

describe('SSE event size bound', () => {
  test('an event that grows past the bound throws instead of buffering for ever', () => {
    const decoder = new SseDecoder(1000);
    assert.deepEqual(decoder.push('data: {"a":1}\n\ndata: x'), [{ event: undefined, data: '{"a":1}' }]);
    assert.throws(() => {
      for (let i = 0; i < 100; i++) decoder.push('x'.repeat(50));
    }, SseEventTooLarge);
  });

  test('events split at any point still decode (a boundary across two chunks)', () => {
    const text = 'data: one\r\n\r\nevent: e\ndata: two\n\n';
    for (let cut = 0; cut <= text.length; cut++) {
      const decoder = new SseDecoder(1000);
      const events = [
        ...decoder.push(text.slice(0, cut)),
        ...decoder.push(text.slice(cut)),
        ...decoder.flush(),
      ];
      assert.deepEqual(
        events.map((e) => e.data),
        ['one', 'two'],
        `cut at ${cut}`,
      );
    }
  });
});
