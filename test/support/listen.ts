/** A stand-in server on an ephemeral loopback port: the start/stop every HTTP stand-in needs. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Listening {
  /** http://127.0.0.1:PORT */
  origin: string;
  /** closes open connections too, so a test's close never waits on a keep-alive socket */
  close(): Promise<void>;
}

/** Serves `handle`; a handler that throws gets a plain-text 500 (as FastAPI's unhandled errors are). */
export async function listenLocal(
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
): Promise<Listening> {
  const server = createServer((req, res) => {
    handle(req, res).catch((error) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
