/**
 * One path of bench/proxy-instructions.ts in one process: a client, the path's proxy (polar's capture
 * proxy recording to a capture file, http-proxy, or none) and the constant-cost backend, then N
 * sequential streaming calls with a 100 KB request (the request of bench/proxy.ts).
 *
 *   node --import tsx bench/proxy-inproc.ts <direct|bare|polar> <N>
 *
 * With POLAR_BENCH_GATE=1 it prints `READY <pid>` after the warm-up calls (POLAR_BENCH_WARM, default
 * 1000) and waits for SIGUSR2, runs the N measured calls, prints `MEASURED` and waits for SIGUSR2 again:
 * the driver turns callgrind's instrumentation on and off around the measured calls only.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import httpProxy from 'http-proxy';
import { createBackend } from '../src/backends/index.ts';
import { newCounters, recordCalls } from '../src/capture/call-record.ts';
import { CaptureWriter } from '../src/capture/writer.ts';
import { ProxyServer } from '../src/proxy/server.ts';
import { startFastBackend } from './fast-backend.ts';
import { BENCH_REQUEST, streamingCall } from './proxy-client.ts';

const [kind, count] = process.argv.slice(2);
if (kind !== 'direct' && kind !== 'bare' && kind !== 'polar') {
  throw new Error('usage: proxy-inproc.ts <direct|bare|polar> <N>');
}
const n = Number(count ?? 100);
const key = 'polar-bench-key-0123456789';
const backend = await startFastBackend();
const dir = mkdtempSync(join(tmpdir(), 'polar-bench-inproc-'));
let root = backend.url.replace(/\/v1$/, '');
let close = async () => {};
if (kind === 'polar') {
  const proxy = new ProxyServer();
  root = (await proxy.listen()).url;
  const upstream = await createBackend({ kind: 'vllm', url: backend.url, model: 'm' });
  const writer = new CaptureWriter(join(dir, 'capture.jsonl'));
  const session = { id: 'sess_bench', key, harness: 'generic', tokenExact: upstream.tokenExact, writer };
  proxy.addSession({
    id: 'sess_bench',
    key,
    model: 'm',
    backend: upstream,
    state: new Map(),
    complete: recordCalls(session, newCounters()),
  });
  close = async () => {
    await proxy.close(1000);
    writer.close();
  };
} else if (kind === 'bare') {
  const forward = httpProxy.createProxyServer({ target: root, agent: new Agent({ keepAlive: true }) });
  const server = createServer((req, res) => forward.web(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  root = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
}

const agent = new Agent({ keepAlive: true });
const url = `${root}/v1/chat/completions`;
const headers = { authorization: `Bearer ${key}` };

async function calls(k: number): Promise<void> {
  for (let i = 0; i < k; i++)
    if (!(await streamingCall(url, BENCH_REQUEST, headers, agent)).ok)
      throw new Error(`${kind}: call ${i} failed`);
}

const gated = process.env.POLAR_BENCH_GATE === '1';
const gate = (line: string) => {
  if (!gated) return Promise.resolve();
  console.log(line);
  return new Promise<void>((resolve) => process.once('SIGUSR2', () => resolve()));
};
try {
  await calls(Number(process.env.POLAR_BENCH_WARM ?? 1000));
  await gate(`READY ${process.pid}`);
  await calls(n);
  // (the records of the last calls are written on the next turn: inside the measured span)
  await new Promise((resolve) => setTimeout(resolve, 50));
  await gate('MEASURED');
} finally {
  await close();
  await backend.close();
  agent.destroy();
  rmSync(dir, { recursive: true, force: true });
}
