/** The harness side of the proxy benchmarks (bench/proxy.ts, bench/proxy-inproc.ts): the request and the call. */
import { type Agent, request } from 'node:http';

/** A streaming Chat Completions request of about 100 KB (a system prompt and one long user turn). */
export const BENCH_REQUEST = JSON.stringify({
  model: 'm',
  stream: true,
  stream_options: { include_usage: true },
  messages: [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'x'.repeat(100 * 1024) },
  ],
});

/** POSTs the body and reads the stream to its end: whether it answered 200 and ended with [DONE], and how long it took. */
export function streamingCall(
  url: string,
  body: string,
  headers: Record<string, string>,
  agent: Agent,
): Promise<{ ok: boolean; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const u = new URL(url);
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          ...headers,
        },
      },
      (res) => {
        let tail = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          tail = (tail + d).slice(-64);
        });
        res.on('end', () =>
          resolve({ ok: res.statusCode === 200 && tail.includes('[DONE]'), ms: performance.now() - t0 }),
        );
      },
    );
    req.on('error', () => resolve({ ok: false, ms: performance.now() - t0 }));
    req.end(body);
  });
}
