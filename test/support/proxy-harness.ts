/** An in-process proxy with one session and a capture file, for fault and protocol tests over real HTTP. */
import { join } from 'node:path';
import { createBackend } from '../../src/backends/index.ts';
import type { BackendOptions } from '../../src/backends/types.ts';
import { type CallCounters, newCounters, recordCalls } from '../../src/capture/call-record.ts';
import { readCapture } from '../../src/capture/reader.ts';
import type { CallRecord } from '../../src/capture/record.ts';
import { CaptureWriter } from '../../src/capture/writer.ts';
import { limitBackend } from '../../src/proxy/limits.ts';
import { ProxyServer, type ProxySession } from '../../src/proxy/server.ts';
import { tempDir } from './temp.ts';

export interface TestProxy {
  url: string;
  key: string;
  file: string;
  proxy: ProxyServer;
  session: ProxySession;
  counters: CallCounters;
  records(): Promise<CallRecord[]>;
  close(): Promise<void>;
}

export async function startProxy(
  backend: Partial<BackendOptions> & { url: string },
  options: {
    maxBodyBytes?: number;
    /** request-body bytes held at once over all calls */
    bodyBudgetBytes?: number;
    /** wrap the backend in polar serve's in-flight bound */
    maxInflight?: number;
  } = {},
): Promise<TestProxy> {
  const dir = tempDir('polar-proxy-');
  const file = join(dir, 'capture.jsonl');
  const writer = new CaptureWriter(file);
  const proxy = new ProxyServer({
    maxBodyBytes: options.maxBodyBytes,
    ...(options.bodyBudgetBytes ? { bodyBudgetBytes: options.bodyBudgetBytes } : {}),
  });
  const { url } = await proxy.listen();
  const key = 'polar-test-key-0123456789abcdef';
  const plain = await createBackend({ kind: 'vllm', model: 'Qwen/Qwen3-4B', timeoutMs: 2000, ...backend });
  const created = options.maxInflight ? limitBackend(plain, options.maxInflight) : plain;
  const counters = newCounters();
  const session: ProxySession = {
    id: 'sess_test',
    key,
    model: 'Qwen/Qwen3-4B',
    backend: created,
    state: new Map(),
    complete: recordCalls(
      { id: 'sess_test', key, harness: 'generic', tokenExact: created.tokenExact, writer },
      counters,
    ),
  };
  proxy.addSession(session);
  return {
    url,
    key,
    file,
    proxy,
    session,
    counters,
    async records() {
      const out: CallRecord[] = [];
      for await (const { record } of readCapture(file)) if (record.type === 'call') out.push(record);
      return out;
    },
    async close() {
      await proxy.close(1000);
      writer.close();
    },
  };
}

export function post(
  url: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: 'POST',
    ...(signal ? { signal } : {}),
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** One harness chat call with user message `text` through the proxy; its status and whole body. */
export async function chatThrough(
  p: TestProxy,
  text: string,
  stream = false,
): Promise<{ status: number; body: string }> {
  const r = await post(
    p.url,
    '/v1/chat/completions',
    { model: 'm', messages: [{ role: 'user', content: text }], stream },
    { authorization: `Bearer ${p.key}` },
  );
  return { status: r.status, body: await r.text() };
}

/** The record of the call whose request held `text` (waits for it: records are written after the answer). */
export async function recordOf(p: TestProxy, text: string): Promise<CallRecord> {
  for (let i = 0; i < 200; i++) {
    const found = (await p.records()).find((r) => JSON.stringify(r.request.body).includes(text));
    if (found) return found;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no record of a call with ${text}`);
}
