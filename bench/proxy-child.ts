/** Runs one proxy in its own process for bench/proxy.ts: `polar` (the capture proxy) or `bare` (http-proxy). */

import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import httpProxy from 'http-proxy';
import { createBackend } from '../src/backends/index.ts';
import { newCounters, recordCalls } from '../src/capture/call-record.ts';
import { CaptureWriter } from '../src/capture/writer.ts';
import { ProxyServer } from '../src/proxy/server.ts';

const [kind, backendUrl, key] = process.argv.slice(2) as [string, string, string];
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
});
process.send!({ url });
