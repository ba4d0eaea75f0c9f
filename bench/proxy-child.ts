/**
 * Runs one proxy in its own process for bench/proxy.ts: `polar` (the capture proxy), `bare` (http-proxy)
 * or `floor` (bench/proxy-floor.ts: the least a recording proxy must do).
 * With POLAR_BENCH_PHASES=1 it also notes when each call reaches each phase (bench/proxy-phases.ts).
 */

import { subscribe } from 'node:diagnostics_channel';
import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { createServer, type IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import httpProxy from 'http-proxy';
import { createBackend } from '../src/backends/index.ts';
import { newCounters, recordCalls } from '../src/capture/call-record.ts';
import { CaptureWriter } from '../src/capture/writer.ts';
import { ProxyServer } from '../src/proxy/server.ts';
import { startFloorProxy } from './proxy-floor.ts';

const [kind, backendUrl, key] = process.argv.slice(2) as [string, string, string];

/**
 * Each call's phases in ms after its request head was parsed, from node:http's diagnostics channels
 * (node v20 lib/_http_client.js and _http_server.js): `http.client.request.start` is published in
 * ClientRequest's _finish (the backend request handed to the socket whole), `http.client.response.finish`
 * when the backend's response head is parsed, `http.server.response.finish` at the answer's 'finish' (for
 * polar after the call record is written, which follows the answer's last write in the same turn).
 * One call at a time (the phases benchmark is sequential): a phase keeps its first time.
 */
const phases: Record<string, number[]> = {};
if (process.env.POLAR_BENCH_PHASES) {
  let t0 = 0;
  let call: Record<string, number> = {};
  const mark = (name: string) => {
    call[name] ??= performance.now() - t0;
  };
  subscribe('http.server.request.start', (m) => {
    const { request } = m as { request: IncomingMessage };
    t0 = performance.now();
    call = {};
    request.once('end', () => mark('request body read'));
  });
  subscribe('http.client.request.start', () => mark('backend request sent'));
  subscribe('http.client.response.finish', (m) => {
    mark('backend response head');
    (m as { response: IncomingMessage }).response.once('end', () => mark('backend response end'));
  });
  // the answer's end handed to the socket: no channel says so, so ServerResponse.end is wrapped (here only)
  const end = ServerResponse.prototype.end;
  ServerResponse.prototype.end = function (this: ServerResponse, ...args: Parameters<typeof end>) {
    mark('answer ended');
    return end.apply(this, args);
  } as typeof end;
  subscribe('http.server.response.finish', () => {
    mark('answer finished');
    for (const [name, ms] of Object.entries(call)) {
      phases[name] ??= [];
      phases[name].push(ms);
    }
  });
}
let url: string;
let dir: string | undefined;
if (kind === 'bare') {
  const proxy = httpProxy.createProxyServer({
    target: backendUrl.replace(/\/v1$/, ''),
    agent: new (await import('node:http')).Agent({ keepAlive: true, maxSockets: 256 }),
  });
  const server = createServer((req, res) => proxy.web(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
} else if (kind === 'floor') {
  dir = await mkdtemp(join(tmpdir(), 'polar-bench-'));
  url = await startFloorProxy(backendUrl, join(dir, 'capture.jsonl'));
} else {
  dir = await mkdtemp(join(tmpdir(), 'polar-bench-'));
  const proxy = new ProxyServer();
  url = (await proxy.listen()).url;
  const backend = await createBackend({ kind: 'vllm', url: backendUrl, model: 'm' });
  const writer = new CaptureWriter(join(dir, 'capture.jsonl'));
  proxy.addSession({
    id: 'sess_bench',
    key,
    model: 'm',
    backend,
    state: new Map(),
    complete: recordCalls(
      { id: 'sess_bench', key, harness: 'generic', tokenExact: backend.tokenExact, writer },
      newCounters(),
    ),
  });
}
let peak = 0;
// (memoryUsage.rss() alone: the full memoryUsage() walks the heap and showed up in the profile)
setInterval(() => {
  peak = Math.max(peak, process.memoryUsage.rss());
}, 20).unref();
// the capture it wrote goes with it (each bench run used to leave one in the temp folder)
process.on('exit', () => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});
process.on('SIGINT', () => process.exit(0));
process.on('message', (m) => {
  if (m === 'rss') {
    process.send!({ rss: Math.max(peak, process.memoryUsage.rss()) });
    peak = 0; // each query reports the peak since the previous one
  }
  if (m === 'cpu') {
    const c = process.cpuUsage();
    process.send!({ cpu: (c.user + c.system) / 1000 });
  }
  if (m === 'phases') {
    process.send!({ phases });
    for (const name of Object.keys(phases)) delete phases[name];
  }
});
process.send!({ url });
