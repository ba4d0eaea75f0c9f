/**
 * The capture proxy: an HTTP server on 127.0.0.1 that authenticates each request by its per-session key,
 * converts it from the harness's wire API to the canonical form, asks the session's backend to generate,
 * streams the answer back in the harness's API, and hands each finished call to its session
 * (`complete`). It forwards; recording is the session's business (src/capture/), so nothing here knows
 * of files. One server can hold many sessions (polar capture uses one; polar serve many).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Backend } from '../backends/types.ts';
import { presentedToken, tokenDigest } from '../http/auth.ts';
import { BodyBudget } from '../http/body.ts';
import { sendJson } from '../http/reply.ts';
import { type ConnectionOptions, HttpServer, type Listening } from '../http/server.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { type ApiName, fault, type ProxyFault } from '../protocols/canonical.ts';
import { log } from '../util/log.ts';
import { CallAborted, type CallError, CallInProgress, type CompletedCall } from './call.ts';
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
  /** request-body bytes held at once over all calls (default DEFAULTS.bodyBudgetBytes, at least maxBodyBytes) */
  bodyBudgetBytes?: number;
  /**
   * Routes served before model-call authentication (polar serve's admin API). Returns true when it
   * answered the request.
   */
  admin?: (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;
}

/** A call in flight: how to stop it, and when it is over (its record handed to its session). */
interface Running {
  stop(reason: CallAborted): void;
  done: Promise<void>;
}

export class ProxyServer {
  private readonly http: HttpServer;
  /** by the SHA-256 digest of their key (hex): a lookup never compares the secret itself */
  private readonly sessions = new Map<string, ProxySession>();
  /**
   * The key each connection last authenticated with, and its digest: a keep-alive connection presents
   * the same key with every call, and hashing it each time took about 1% of the proxy's CPU per call
   * (a SHA-256 and its hex). What a request presents is compared with what its own connection presented
   * before, which only that client could send; a removed session's digest no longer finds it.
   */
  private readonly connectionKeys = new WeakMap<Socket, { key: string; digest: string }>();
  private readonly host: string;
  private readonly port: number;
  private readonly maxBodyBytes: number;
  /** the bodies of the calls in flight, over all sessions */
  readonly bodies: BodyBudget;
  private readonly admin: ProxyOptions['admin'];
  private accepting = true;
  /** calls in flight per session key */
  private readonly running = new Map<string, Set<Running>>();
  /** requests refused for a missing or unknown key */
  unauthorized = 0;

  constructor(options: ProxyOptions = {}) {
    this.host = options.host ?? '127.0.0.1';
    this.port = options.port ?? 0;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULTS.maxBodyBytes.value;
    this.bodies = new BodyBudget(
      Math.max(options.bodyBudgetBytes ?? DEFAULTS.bodyBudgetBytes.value, this.maxBodyBytes),
    );
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
    return this.running.get(key)?.size ?? 0;
  }

  /**
   * Ends a session's traffic: its key stops working at once, its calls in flight get up to waitMs to
   * finish (callers pass the call deadline: a call that runs longer has been ended by it), then the
   * rest are cut (their records say `cut`) and get cutWaitMs more to hand over their record. Resolves
   * with the calls still running after that (whose records will come too late for the session's end).
   */
  async retire(session: ProxySession, waitMs: number, cutWaitMs = 5000): Promise<number> {
    this.removeSession(session.key);
    if (await this.settled(session.key, waitMs)) return 0;
    const message = 'the session was closed while the call was running';
    for (const run of this.running.get(session.key) ?? []) run.stop(new CallAborted('cut', message));
    await this.settled(session.key, cutWaitMs);
    return this.activeCalls(session.key);
  }

  /** whether every call of the session in flight now was over within timeoutMs */
  private async settled(key: string, timeoutMs: number): Promise<boolean> {
    const runs = [...(this.running.get(key) ?? [])];
    if (runs.length === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((r) => {
      timer = setTimeout(() => r(false), timeoutMs);
    });
    try {
      return await Promise.race([Promise.all(runs.map((run) => run.done)).then(() => true), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Stops accepting, waits up to graceMs for calls in flight to finish (their records are written), then
   * cuts the rest (their records say `cut`) and closes.
   */
  async close(graceMs = 10_000): Promise<void> {
    this.accepting = false;
    await this.http.close(graceMs, () => {
      const reason = new CallAborted('cut', 'polar shut down while the call was running');
      for (const runs of this.running.values()) for (const run of runs) run.stop(reason);
    });
  }

  private authenticate(req: IncomingMessage): ProxySession | undefined {
    const key = presentedToken(req, { apiKeyHeader: true });
    if (!key) return undefined;
    // sessions are keyed by the key's digest: a hit is the same key, found without comparing secrets
    const known = this.connectionKeys.get(req.socket);
    if (known !== undefined && known.key === key) return this.sessions.get(known.digest);
    const digest = tokenDigest(key).toString('hex');
    const session = this.sessions.get(digest);
    if (session !== undefined) this.connectionKeys.set(req.socket, { key, digest });
    return session;
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
      // (nor does its connection stay: a client without a key holds none open)
      res.setHeader('connection', 'close');
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
    const controller = new AbortController();
    // what the call had done when it was stopped: a failure before the stop stays its error
    let before: { error: CallError | null; headersSent: boolean } | null = null;
    let finished!: () => void;
    const run: Running = {
      stop: (reason) => {
        if (controller.signal.aborted) return;
        before = { error: call.error, headersSent: res.headersSent };
        controller.abort(reason);
      },
      done: new Promise<void>((resolve) => {
        finished = resolve;
      }),
    };
    const runs = this.running.get(session.key) ?? new Set<Running>();
    this.running.set(session.key, runs.add(run));
    res.on('close', () => {
      if (!res.writableFinished)
        run.stop(new CallAborted('client_closed', 'the harness closed the connection'));
    });
    const bodyClaim = this.bodies.claim();
    const scope: CallScope = {
      call,
      session,
      protocol,
      req,
      res,
      signal: controller.signal,
      maxBodyBytes: this.maxBodyBytes,
      bodyClaim,
    };
    try {
      if (r.kind === 'count-tokens') await countTokensCall(scope);
      else await modelCall(scope);
    } finally {
      const reason: unknown = controller.signal.reason;
      if (before !== null && reason instanceof CallAborted) {
        const { error, headersSent } = before;
        call.aborted(reason, error, headersSent);
      }
      try {
        session.complete(call.completed());
      } catch (error) {
        log.error(`proxy: the session could not take call ${call.id}: ${(error as Error).message}`);
      } finally {
        // (after the record: retire() waits for it; in finally: whatever recording did)
        runs.delete(run);
        if (runs.size === 0) this.running.delete(session.key);
        bodyClaim.release();
        finished();
      }
    }
  }
}
