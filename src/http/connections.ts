/**
 * Who may hold a connection to a polar server. Node's own cap (server.maxConnections) drops every new
 * connection once it is reached, whoever holds the open ones: 1,100 idle TCP connections, which need no
 * token, locked polar serve out (its /status too) until they closed. Here:
 * - a connection that has not delivered a complete request (its headers) within `idleMs` of opening is
 *   closed; at a cap, the oldest such connection makes room for a new one (a connection that has
 *   carried a request is never taken);
 * - one client address holds at most `perAddress` connections;
 * - `reserve` keeps a few connections beyond the cap for the requests it accepts (polar serve: its
 *   admin API); anything else asked on them is answered 503 and the connection closed.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { sendJson } from './reply.ts';

export interface ConnectionLimits {
  /** open connections at most */
  max: number;
  /** open connections from one client address at most */
  perAddress: number;
  /** ms a connection may stay open without delivering a complete request */
  idleMs: number;
  /** connections kept beyond the caps for the requests `accepts` takes */
  reserve?: { slots: number; accepts: (req: IncomingMessage) => boolean };
}

interface Held {
  address: string;
  /** it has delivered a request: never closed to make room */
  requested: boolean;
  /** one of the reserved slots */
  reserved: boolean;
  timer: NodeJS.Timeout | undefined;
}

export class ConnectionGuard {
  private readonly held = new Map<Socket, Held>();
  private readonly perAddress = new Map<string, number>();
  private normal = 0;
  private reservedOpen = 0;
  /** connections closed to make room, and connections refused at a cap */
  evicted = 0;
  refused = 0;

  constructor(
    server: Server,
    readonly limits: ConnectionLimits,
  ) {
    // node's cap just above ours: a new connection arrives at a full server, and may take an idle one's place
    server.maxConnections = limits.max + (limits.reserve?.slots ?? 0) + 1;
    server.on('connection', (socket: Socket) => this.admit(socket));
  }

  /** open connections now (reserved ones included) */
  get open(): number {
    return this.held.size;
  }

  private admit(socket: Socket): void {
    const address = socket.remoteAddress ?? 'unknown';
    const fits =
      ((this.perAddress.get(address) ?? 0) < this.limits.perAddress ||
        this.makeRoom((h) => h.address === address)) &&
      (this.normal < this.limits.max || this.makeRoom(() => true));
    const reserve = this.limits.reserve;
    if (fits) this.hold(socket, address, false);
    else if (reserve && this.reservedOpen < reserve.slots) this.hold(socket, address, true);
    else {
      this.refused++;
      socket.destroy();
    }
  }

  /** closes the oldest connection that never delivered a request and matches; false when there is none */
  private makeRoom(match: (h: Held) => boolean): boolean {
    for (const [socket, h] of this.held) {
      if (h.requested || h.reserved || !match(h)) continue;
      this.release(socket);
      socket.destroy();
      this.evicted++;
      return true;
    }
    return false;
  }

  private hold(socket: Socket, address: string, reserved: boolean): void {
    const timer = setTimeout(() => socket.destroy(), this.limits.idleMs);
    timer.unref();
    this.held.set(socket, { address, requested: false, reserved, timer });
    this.perAddress.set(address, (this.perAddress.get(address) ?? 0) + 1);
    if (reserved) this.reservedOpen++;
    else this.normal++;
    socket.once('close', () => this.release(socket));
  }

  private release(socket: Socket): void {
    const h = this.held.get(socket);
    if (!h) return;
    this.held.delete(socket);
    clearTimeout(h.timer);
    const n = (this.perAddress.get(h.address) ?? 1) - 1;
    if (n > 0) this.perAddress.set(h.address, n);
    else this.perAddress.delete(h.address);
    if (h.reserved) this.reservedOpen--;
    else this.normal--;
  }

  /**
   * A request arrived on its connection (headers complete): the connection is no longer idle. False
   * when it was refused here (a reserved connection carrying a request the reserve does not take).
   */
  request(req: IncomingMessage, res: ServerResponse): boolean {
    const h = this.held.get(req.socket);
    if (!h) return true;
    h.requested = true;
    clearTimeout(h.timer);
    h.timer = undefined;
    if (!h.reserved || this.limits.reserve?.accepts(req)) return true;
    req.resume();
    res.setHeader('connection', 'close');
    sendJson(res, 503, {
      error: { message: 'polar holds as many connections as it allows: retry shortly', type: 'server_error' },
    });
    return false;
  }
}
