/**
 * The host side of the proxy path into a sandbox or container: a Unix socket (in the environment's
 * private folder, bound inside) whose every connection is piped to a TCP address on the host (the
 * capture proxy on 127.0.0.1:PORT, or a port the user allowed). forward.mjs is the other end.
 */
import { chmod, chown, rm } from 'node:fs/promises';
import net from 'node:net';

export interface Bridge {
  socket: string;
  close(): Promise<void>;
}

export async function openBridge(
  socket: string,
  target: { host: string; port: number },
  owner?: { uid: number; gid: number },
  mode = 0o600,
): Promise<Bridge> {
  await rm(socket, { force: true });
  const open = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true }, (inside) => {
    const upstream = net.connect({ host: target.host, port: target.port, allowHalfOpen: true });
    open.add(inside).add(upstream);
    inside.pipe(upstream);
    upstream.pipe(inside);
    const end = () => {
      inside.destroy();
      upstream.destroy();
      open.delete(inside);
      open.delete(upstream);
    };
    inside.on('error', end).on('close', () => upstream.end());
    upstream.on('error', end).on('close', () => inside.end());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, () => resolve());
  });
  // only the sandbox's uid (or the user) may connect (a container's own root: mode 0666 in a private folder)
  if (owner) await chown(socket, owner.uid, owner.gid);
  await chmod(socket, mode);
  return {
    socket,
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(socket, { force: true });
    },
  };
}

/** `http://HOST:PORT...` -> host and port (the capture proxy's URL). */
export function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || (u.protocol === 'https:' ? 443 : 80)) };
}
