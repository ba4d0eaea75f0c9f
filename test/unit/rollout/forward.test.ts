/**
 * The proxy path into a sandbox or container, on this host: a TCP server (the capture proxy) <- a Unix
 * socket bridge (bridge.ts) <- forward.mjs listening on 127.0.0.1:PORT <- a client that only knows
 * `http://127.0.0.1:PORT`. forward.mjs passes its command's exit status and signal on, and refuses to
 * run the command when it cannot listen.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { execTree } from '../../../src/rollout/exec.ts';
import { hostPort, openBridge } from '../../../src/rollout/runtime/bridge.ts';
import { FORWARDER } from '../../../src/rollout/runtime/sandbox.ts';
import { tempDir } from '../../support/temp.ts';

async function freePort(): Promise<number> {
  const s = createNetServer();
  await new Promise<void>((done) => s.listen(0, '127.0.0.1', done));
  const { port } = s.address() as { port: number };
  await new Promise<void>((done) => s.close(() => done()));
  return port;
}

test('a client of 127.0.0.1:PORT reaches the TCP server through forward.mjs and the socket bridge', async () => {
  const proxy = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => res.end(`got ${req.method} ${req.url} ${body.length}`));
  });
  await new Promise<void>((done) => proxy.listen(0, '127.0.0.1', done));
  const target = hostPort(`http://127.0.0.1:${(proxy.address() as { port: number }).port}`);
  const bridge = await openBridge(join(tempDir('polar-bridge-'), 'p.sock'), target);
  const port = await freePort();
  try {
    const client = `fetch('http://127.0.0.1:${port}/v1/chat', { method: 'POST', body: 'x'.repeat(100000) }).then((r) => r.text()).then(console.log)`;
    const r = await execTree(
      process.execPath,
      [FORWARDER, `${port}=${bridge.socket}`, '--', process.execPath, '-e', client],
      {
        timeoutMs: 30_000,
      },
    );
    assert.equal(r.exitCode, 0, r.output);
    assert.match(r.output, /got POST \/v1\/chat 100000/);
  } finally {
    await bridge.close();
    proxy.close();
  }
});

test('forward.mjs exits as its command did, and does not run it when it cannot listen', async () => {
  const port = await freePort();
  const sock = join(tempDir('polar-bridge-'), 'none.sock');
  const code = await execTree(process.execPath, [FORWARDER, `${port}=${sock}`, '--', 'sh', '-c', 'exit 3']);
  assert.equal(code.exitCode, 3);
  const killed = await execTree(process.execPath, [
    FORWARDER,
    `${port}=${sock}`,
    '--',
    'sh',
    '-c',
    'kill -9 $$',
  ]);
  assert.equal(killed.exitCode, 137, 'a signal comes back as 128 + its number, as bwrap reports it');
  const busy = createNetServer();
  await new Promise<void>((done) => busy.listen(port, '127.0.0.1', done));
  try {
    const r = await execTree(process.execPath, [FORWARDER, `${port}=${sock}`, '--', 'sh', '-c', 'echo RAN']);
    assert.equal(r.exitCode, 125);
    assert.match(r.output, /cannot listen/);
    assert.doesNotMatch(r.output, /RAN/);
  } finally {
    busy.close();
  }
  const usage = await execTree(process.execPath, [FORWARDER, 'nothing']);
  assert.equal(usage.exitCode, 125);
});
