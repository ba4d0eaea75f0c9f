/**
 * One HTTP server shape for the proxy, `polar serve` and `polar gym`: listening (host, port, url back),
 * the connection knobs (timeouts; who may hold a connection: src/http/connections.ts), handler errors
 * mapped to JSON replies, and a close that lets requests in flight finish within a grace period.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DEFAULTS } from '../options/defaults.ts';
import { log } from '../util/log.ts';
import { ConnectionGuard, type ConnectionLimits } from './connections.ts';
import { errorReply } from './errors.ts';
import { sendJson } from './reply.ts';

/**
 * The connection knobs every polar server takes. Unset, a server gets DEFAULTS.requestTimeoutMs (a body
 * that trickles in is cut off), DEFAULTS.maxConnections, DEFAULTS.maxConnectionsPerAddress and
 * DEFAULTS.idleConnectionMs.
 */
export type ConnectionOptions = Pick<
  HttpServerOptions,
  | 'requestTimeout'
  | 'headersTimeout'
  | 'keepAliveTimeout'
  | 'maxConnections'
  | 'maxConnectionsPerAddress'
  | 'idleConnectionMs'
  | 'reserve'
>;

export interface HttpServerOptions {
  /** ms for a whole request (headers and body) to arrive; 0: none (node's meaning). Default DEFAULTS.requestTimeoutMs */
  requestTimeout?: number;
  /** ms for the headers to arrive */
  headersTimeout?: number;
  /** ms an idle keep-alive connection stays open */
  keepAliveTimeout?: number;
  /** open connections at most; beyond it a new one takes an idle one's place, or is dropped. Default DEFAULTS.maxConnections */
  maxConnections?: number;
  /** open connections from one client address at most. Default DEFAULTS.maxConnectionsPerAddress */
  maxConnectionsPerAddress?: number;
  /** ms a connection may stay open without delivering a complete request. Default DEFAULTS.idleConnectionMs */
  idleConnectionMs?: number;
  /** connections kept beyond the caps for the requests it accepts (polar serve: the admin API) */
  reserve?: ConnectionLimits['reserve'];
  /** the reply for an error a handler threw (default: errorReply) */
  onError?: (error: unknown, req: IncomingMessage) => { status: number; body: unknown };
}

export interface Listening {
  url: string;
  port: number;
  host: string;
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

export class HttpServer {
  readonly server: Server;
  readonly connections: ConnectionGuard;
  private readonly pending = new Set<Promise<void>>();

  constructor(handler: Handler, options: HttpServerOptions = {}) {
    const onError = options.onError ?? ((error: unknown) => errorReply(error));
    const requestTimeout = options.requestTimeout ?? DEFAULTS.requestTimeoutMs.value;
    // node checks the request timeout every connectionsCheckingInterval (30 s by default): a short
    // limit is checked more often, so it holds within about a quarter of itself
    const interval =
      requestTimeout > 0 ? Math.min(30_000, Math.max(50, Math.floor(requestTimeout / 4))) : 30_000;
    this.server = createServer({ connectionsCheckingInterval: interval }, (req, res) => {
      if (!this.connections.request(req, res)) return;
      const done = handler(req, res).catch((error) => {
        let reply: { status: number; body: unknown };
        try {
          reply = onError(error, req);
        } catch (inner) {
          reply = errorReply(inner);
        }
        if (reply.status >= 500)
          log.debug(`http: ${req.method} ${req.url}: ${(error as Error)?.stack ?? error}`);
        sendJson(res, reply.status, reply.body);
      });
      this.pending.add(done);
      done.finally(() => this.pending.delete(done));
    });
    this.server.keepAliveTimeout = options.keepAliveTimeout ?? 65_000;
    this.server.requestTimeout = requestTimeout;
    // (node requires headersTimeout <= requestTimeout)
    const headers = options.headersTimeout ?? 70_000;
    this.server.headersTimeout = requestTimeout > 0 ? Math.min(headers, requestTimeout) : headers;
    this.connections = new ConnectionGuard(this.server, {
      max: options.maxConnections ?? DEFAULTS.maxConnections.value,
      perAddress: options.maxConnectionsPerAddress ?? DEFAULTS.maxConnectionsPerAddress.value,
      idleMs: options.idleConnectionMs ?? DEFAULTS.idleConnectionMs.value,
      ...(options.reserve ? { reserve: options.reserve } : {}),
    });
  }

  /** requests whose handler has not finished */
  get inflight(): number {
    return this.pending.size;
  }

  async listen(port: number, host: string): Promise<Listening> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const address = this.server.address() as AddressInfo;
    const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return { url: `http://${shown}:${address.port}`, port: address.port, host: address.address };
  }

  /**
   * Stops accepting and closes idle connections, waits for the handlers in flight (up to graceMs when
   * given; then `overdue` runs, e.g. to abort them, and they get 2 s more), then drops every connection.
   */
  async close(graceMs?: number, overdue?: () => void): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const pending = Promise.allSettled([...this.pending]);
    if (graceMs === undefined) await pending;
    else {
      const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), graceMs).unref());
      if ((await Promise.race([pending.then(() => 'done' as const), timer])) === 'timeout') {
        overdue?.();
        await Promise.race([pending, new Promise((r) => setTimeout(r, 2000).unref())]);
      }
    }
    this.server.closeAllConnections();
    await closed;
  }
}

/**
 * Resolves once SIGTERM or SIGINT arrived and `close` finished (a failed close resolves too: the
 * process is ending). For long-running servers: `await untilSignal((s) => server.close())`.
 */
export function untilSignal(close: (signal: NodeJS.Signals) => Promise<void>): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      close(signal).then(resolve, resolve);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}
