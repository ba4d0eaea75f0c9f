#!/usr/bin/env node
// The forwarder inside a sandbox or container (plain JavaScript: it runs under whatever node is mounted,
// without tsx). The sandbox has its own network namespace with only a loopback; polar's capture proxy
// listens on the host's 127.0.0.1:PORT. polar binds a Unix socket into the sandbox that leads to the
// proxy (bridge.ts); this script listens on the sandbox's own 127.0.0.1:PORT and pipes every connection
// to that socket, so a harness keeps its config `http://127.0.0.1:PORT` and reaches nothing else. Once
// every port listens it runs the command, passes signals on, and exits as the command did; the sandbox
// (and with it this forwarder) ends then.
//
// usage: node forward.mjs PORT=SOCKET [PORT=SOCKET ...] -- COMMAND [ARGS ...]
import { spawn } from 'node:child_process';
import net from 'node:net';
import { constants } from 'node:os';

const argv = process.argv.slice(2);
const sep = argv.indexOf('--');
if (sep < 1 || sep === argv.length - 1) {
  process.stderr.write('usage: forward.mjs PORT=SOCKET [...] -- COMMAND [ARGS...]\n');
  process.exit(125);
}
const specs = argv.slice(0, sep).map((spec) => {
  const eq = spec.indexOf('=');
  return { port: Number(spec.slice(0, eq)), socket: spec.slice(eq + 1) };
});
const [file, ...args] = argv.slice(sep + 1);

function listen({ port, socket }) {
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    const upstream = net.connect({ path: socket, allowHalfOpen: true });
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.unref();
      resolve(server);
    });
  });
}

try {
  await Promise.all(specs.map(listen));
} catch (error) {
  process.stderr.write(`polar forwarder: cannot listen: ${error.message}\n`);
  process.exit(125);
}
const child = spawn(file, args, { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
child.on('error', (error) => {
  process.stderr.write(`polar forwarder: cannot start ${file}: ${error.message}\n`);
  process.exit(127);
});
child.on('exit', (code, signal) => {
  process.exit(code ?? 128 + (constants.signals[signal] ?? 1));
});
