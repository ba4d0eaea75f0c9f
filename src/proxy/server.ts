/**
 * The capture proxy: an HTTP server on 127.0.0.1 that authenticates each request by its per-session key,
 * converts it from the harness's wire API to the canonical form, asks the session's backend to generate,
 * streams the answer back in the harness's API, and hands each finished call to its session
 * (`complete`). It forwards; recording is the session's business (src/capture/), so nothing here knows
 * of files. One server can hold many sessions (polar capture uses one; polar serve many).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Backend } from '../backends/types.ts';
import { presentedToken, tokenDigest } from '../http/auth.ts';
import { sendJson } from '../http/reply.ts';
import { type ConnectionOptions, HttpServer, type Listening } from '../http/server.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { type ApiName, fault, type ProxyFault } from '../protocols/canonical.ts';
import { log } from '../util/log.ts';
import { CallInProgress, type CompletedCall } from './call.ts';
import { type CallScope, countTokensCall, modelCall } from './model-call.ts';
import { PROTOCOLS, type Route, route } from './protocols.ts';

export type { CompletedCall } from './call.ts';

export interface ProxySession {
  id: string;
  /** the per-session API key the harness must present */
  key: string;
  /** the model the backend serves (every harness model name maps to it) */
  model: string;
  backend: Backend;
  /** the backend's per-session state (e.g. the token chain a splicing backend continues) */
  state: Map<string, unknown>;
  /**
   * Receives each call when it is over, synchronously and in the order calls end. It must not throw
   * (an error is logged and the call's answer is already sent).
   */
  complete(call: CompletedCall): void;
}

export interface ProxyOptions {
  /** timeouts and the connection cap of the HTTP server */
  connections?: ConnectionOptions;
  host?: string;
  port?: number;
  maxBodyBytes?: number;
  /**
   * Routes served before model-call authentication (polar serve's admin API). Returns true when it
   * answered the request.
   */
  admin?: (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;
}

export class ProxyServer {
  private readonly http: HttpServer;
  /** by the SHA-256 digest of their key (hex): a lookup never compares the secret itself */
  private readonly sessions = new Map<string, ProxySession>();
  private readonly controllers = new Set<AbortController>();
  private readonly host: string;
  private readonly port: number;
  private readonly maxBodyBytes: number;
  private readonly admin: ProxyOptions['admin'];
  private accepting = true;
  /** requests in flight per session key */
  private readonly active = new Map<string, number>();
  /** requests refused for a missing or unknown key */
  unauthorized = 0;

  constructor(options: ProxyOptions = {}) {
    this.host = options.host ?? '127.0.0.1';
    this.port = options.port ?? 0;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULTS.maxBodyBytes.value;
    this.admin = options.admin;
    this.http = new HttpServer((req, res) => this.handle(req, res), {
      ...options.connections,
      // (the kit logs the stack under --debug)
      onError: () => ({
        status: 500,
        body: { error: { message: 'internal proxy error', type: 'server_error' } },
      }),
    });
  }

  listen(): Promise<Listening> {
    return this.http.listen(this.port, this.host);
  }

  addSession(session: ProxySession): void {
    this.sessions.set(tokenDigest(session.key).toString('hex'), session);
  }

  removeSession(key: string): ProxySession | undefined {
    const digest = tokenDigest(key).toString('hex');
    const session = this.sessions.get(digest);
    this.sessions.delete(digest);
    return session;
  }

  get inflightCount(): number {
    return this.http.inflight;
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  /** requests of this session (by its key) in flight now */
  activeCalls(key: string): number {
    return this.active.get(key) ?? 0;
  }

  /** resolves when no request of this session is in flight any more (or after timeoutMs) */
  async drain(session: ProxySession, timeoutMs = 30_000): Promise<void> {
    const t0 = Date.now();
    while ((this.active.get(session.key) ?? 0) > 0 && Date.now() - t0 < timeoutMs) {
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /**
   * Stops accepting, waits up to graceMs for calls in flight to finish (their records are written), then
   * aborts the rest (their records say so) and closes.
   */
  async close(graceMs = 10_000): Promise<void> {
    this.accepting = false;
    await this.http.close(graceMs, () => {
      for (const controller of this.controllers) controller.abort(new Error('proxy shutting down'));
    });
  }

  private authenticate(req: IncomingMessage): ProxySession | undefined {
    const key = presentedToken(req, { apiKeyHeader: true });
    if (!key) return undefined;
    // sessions are keyed by the key's digest: a hit is the same key, found without comparing secrets
    return this.sessions.get(tokenDigest(key).toString('hex'));
  }

  /** answers with a fault in an API's error shape, without reading the body */
  private refuse(req: IncomingMessage, res: ServerResponse, api: ApiName, f: ProxyFault): void {
    req.resume();
    const { status, body } = PROTOCOLS[api].renderError(f);
    sendJson(res, status, body);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const r = route(req.method ?? 'GET', req.url ?? '/', req.headers);
    if (r.kind === 'health') return sendJson(res, 200, { ok: this.accepting });
    if (!this.accepting) {
      res.setHeader('connection', 'close');
      return this.refuse(req, res, r.api, fault('backend_error', 'polar is shutting down', 503));
    }
    if (this.admin && (await this.admin(req, res))) return;
    const session = this.authenticate(req);
    if (!session) {
      this.unauthorized++;
      const message = 'missing or unknown API key: this proxy only serves the harness polar started';
      // (answered in the shape of the API the path names; a model list in the Anthropic shape unless Gemini's)
      const api = r.kind === 'models' && r.api !== 'gemini' ? 'anthropic-messages' : r.api;
      return this.refuse(req, res, api, fault('authentication', message));
    }
    if (r.kind === 'models') {
      req.resume();
      return sendJson(res, 200, PROTOCOLS[r.api].renderModelList(session.model));
    }
    if (r.kind === 'unknown') {
      return this.refuse(req, res, r.api, fault('not_found', `no route for ${req.method} ${req.url}`));
    }
    await this.call(r, session, req, res);
  }

  /** one model call or token count, from the request to the session's `complete` */
  private async call(
    r: Extract<Route, { kind: 'model-call' | 'count-tokens' }>,
    session: ProxySession,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    const protocol = PROTOCOLS[r.api];
    const countTokens = r.kind === 'count-tokens' ? protocol.countTokens : undefined;
    const call = new CallInProgress(countTokens?.api ?? r.api, r.kind === 'model-call', req);
    this.active.set(session.key, (this.active.get(session.key) ?? 0) + 1);
    const controller = new AbortController();
    this.controllers.add(controller);
    res.on('close', () => {
      if (!res.writableFinished) controller.abort(new Error('harness closed the connection'));
    });
    const scope: CallScope = {
      call,
      session,
      protocol,
      req,
      res,
      signal: controller.signal,
      maxBodyBytes: this.maxBodyBytes,
    };
    try {
      if (r.kind === 'count-tokens') await countTokensCall(scope);
      else await modelCall(scope);
    } finally {
      this.controllers.delete(controller);
      if (controller.signal.aborted && !call.error) {
        const message = String(controller.signal.reason?.message ?? 'aborted');
        call.error = { kind: 'client_closed', message, status: 499 };
      }
      try {
        session.complete(call.completed());
      } catch (error) {
        log.error(`proxy: the session could not take call ${call.id}: ${(error as Error).message}`);
      } finally {
        // (after the record: drain() waits for it; in finally: whatever recording did)
        this.active.set(session.key, (this.active.get(session.key) ?? 1) - 1);
      }
    }
  }
}
