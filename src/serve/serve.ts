/**
 * `polar serve`: one long-running capture proxy for many concurrent rollouts. Sessions are created and
 * closed over a small admin API; every model call is routed to its session by its key, exactly as in
 * `polar capture` (the same ProxyServer and session code). Backend calls are bounded per backend and
 * queued beyond the bound; SIGTERM stops accepting, finishes calls in flight, flushes and exits.
 */
import { readFile, rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { createBackend } from '../backends/index.ts';
import type { BackendOptions } from '../backends/types.ts';
import { ensureBackendReady } from '../backends/wait.ts';
import { type CaptureSession, openSession } from '../capture/session.ts';
import { HARNESSES } from '../harnesses/index.ts';
import { HARNESS_NAMES } from '../harnesses/types.ts';
import { newToken, presentedToken, sameToken } from '../http/auth.ts';
import { errorReply, HttpError } from '../http/errors.ts';
import { readJson, sendJson } from '../http/reply.ts';
import { dispatch, matchRoute, pathOf, type Route } from '../http/router.ts';
import type { ConnectionOptions } from '../http/server.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { type LimitedBackend, limitBackend } from '../proxy/limits.ts';
import { ProxyServer } from '../proxy/server.ts';
import { mkdirPrivate } from '../util/private-files.ts';
import { redactUrl } from '../util/redact.ts';
import { insideDir } from '../util/safe-path.ts';
import { firstIssue } from '../util/zod.ts';

export interface ServeOptions {
  backend: BackendOptions;
  host?: string;
  port?: number;
  /** directory for capture files (one per session) */
  captures: string;
  /** backend calls in flight at most; the rest queue */
  maxInflight?: number;
  /** the bearer token the admin API requires; a fresh one when not given (Served.adminToken) */
  adminToken?: string;
  /** sessions open at once at most; POST /sessions beyond it is 429 (default DEFAULTS.maxSessions) */
  maxSessions?: number;
  /** ms a session may see no call and no admin request before it is closed as timeout (default DEFAULTS.sessionIdleTimeoutMs) */
  sessionIdleTimeoutMs?: number;
  maxBodyBytes?: number;
  /** request-body bytes held at once over all sessions (default DEFAULTS.bodyBudgetBytes); past it 503 */
  bodyBudgetBytes?: number;
  /** timeouts and the connection cap of the HTTP server */
  connections?: ConnectionOptions;
}

const createSessionSchema = z.strictObject({
  harness: z.enum(HARNESS_NAMES).default('generic'),
  task_id: z.string().optional(),
  sample: z.number().int().nonnegative().optional(),
  meta: z.record(z.string(), z.string()).optional(),
  /** profile options, e.g. {"api": "openai-responses"} for Pi */
  harness_options: z.record(z.string(), z.string()).optional(),
  /** the harness command line the client will run (recorded; not run by polar) */
  argv: z.array(z.string()).optional(),
});

interface Live {
  capture: CaptureSession;
  createdAt: Date;
  runDir: string;
  harness: string;
  /** Date.now() of its last call or admin request */
  activity: { at: number };
  /** being closed (DELETE or idle expiry): no longer listed or found */
  closing: boolean;
}

const SESSION_PATH = /^\/sessions\/([^/]+)$/;
/** past the call deadline, a closing session waits this much more (the deadline's own record comes first) */
const CLOSE_MARGIN_MS = 5000;
/** connections kept for the admin API beyond the connection caps */
const ADMIN_RESERVED_CONNECTIONS = 2;
/** admin request bodies are small JSON objects */
const ADMIN_BODY_BYTES = 1024 * 1024;

export interface Served {
  url: string;
  /** the admin API's bearer token (the one given, or the one made) */
  adminToken: string;
  /** stops accepting, waits for calls in flight, closes every open session as interrupted */
  close(graceMs?: number): Promise<void>;
  status(): Record<string, unknown>;
}

export async function startServe(options: ServeOptions): Promise<Served> {
  // the server's set-up checked once before any session can start
  await ensureBackendReady(options.backend);
  const backend = limitBackend(
    await createBackend(options.backend),
    options.maxInflight ?? DEFAULTS.maxInflight.value,
  );
  const captures = resolve(options.captures);
  await mkdirPrivate(captures);
  const admin = new AdminApi(options, backend, captures);
  const proxy = new ProxyServer({
    ...(options.host ? { host: options.host } : {}),
    port: options.port ?? DEFAULTS.servePort.value,
    ...(options.maxBodyBytes ? { maxBodyBytes: options.maxBodyBytes } : {}),
    ...(options.bodyBudgetBytes ? { bodyBudgetBytes: options.bodyBudgetBytes } : {}),
    // the admin API keeps connections of its own past the caps: a flood of connections to the proxy
    // never locks the operator out of /status and DELETE
    connections: {
      ...options.connections,
      reserve: { slots: ADMIN_RESERVED_CONNECTIONS, accepts: (req) => admin.owns(req) },
    },
    admin: (req, res) => admin.handle(req, res),
  });
  admin.proxy = proxy;
  admin.url = (await proxy.listen()).url;
  admin.startExpiry();
  return {
    url: admin.url,
    adminToken: admin.token,
    status: () => admin.status(),
    async close(graceMs = 30_000) {
      await proxy.close(graceMs);
      await admin.closeAll();
      await backend.close();
    },
  };
}

/** The admin API: open sessions, their routes, and the server's status. */
class AdminApi {
  readonly sessions = new Map<string, Live>();
  readonly startedAt = Date.now();
  readonly token: string;
  readonly maxSessions: number;
  readonly idleMs: number;
  proxy!: ProxyServer;
  url = '';
  /** POST /sessions in progress (counted against the cap before they are open) */
  private opening = 0;
  private sweeper: NodeJS.Timeout | undefined;
  readonly routes: Route[] = [
    { method: 'GET', path: '/status', handler: () => ({ status: 200, body: this.status() }) },
    {
      method: 'GET',
      path: '/sessions',
      handler: () => ({ status: 200, body: { sessions: this.open().map(describe) } }),
    },
    {
      method: 'POST',
      path: '/sessions',
      handler: async ({ req }) => {
        const body = await readJson(req, ADMIN_BODY_BYTES, { empty: {} });
        return { status: 201, body: await this.create(body) };
      },
    },
    {
      method: 'GET',
      path: SESSION_PATH,
      handler: ({ params }) => ({ status: 200, body: describe(this.live(params[0]!)) }),
    },
    {
      method: 'DELETE',
      path: SESSION_PATH,
      handler: async ({ params, query }) => ({
        status: 200,
        body: await this.close(this.live(params[0]!), query),
      }),
    },
  ];

  constructor(
    private readonly options: ServeOptions,
    private readonly backend: LimitedBackend,
    private readonly captures: string,
  ) {
    this.token = options.adminToken ?? newToken('polar-admin');
    this.maxSessions = options.maxSessions ?? DEFAULTS.maxSessions.value;
    this.idleMs = options.sessionIdleTimeoutMs ?? DEFAULTS.sessionIdleTimeoutMs.value;
  }

  private open(): Live[] {
    return [...this.sessions.values()].filter((l) => !l.closing);
  }

  /** closes sessions idle past the limit (none of their calls in flight), checked a few times per limit */
  startExpiry(): void {
    const every = Math.min(60_000, Math.max(20, Math.floor(this.idleMs / 4)));
    this.sweeper = setInterval(() => {
      const now = Date.now();
      for (const live of this.open()) {
        if (now - live.activity.at < this.idleMs) continue;
        if (this.proxy.activeCalls(live.capture.proxy.key) > 0) continue;
        this.close(live, new URLSearchParams({ status: 'timeout' })).catch(() => {});
      }
    }, every);
    this.sweeper.unref();
  }

  status(): Record<string, unknown> {
    const backend = this.backend;
    return {
      accepting: true,
      uptime_s: Math.round((Date.now() - this.startedAt) / 1000),
      sessions: this.open().length,
      max_sessions: this.maxSessions,
      requests_in_flight: this.proxy.inflightCount,
      body_bytes_held: this.proxy.bodies.bytes,
      body_budget_bytes: this.proxy.bodies.maxBytes,
      backend: {
        kind: backend.kind,
        url: backend.url && redactUrl(backend.url),
        max_inflight: backend.limit.max,
        inflight: backend.limit.inflight,
        queued: backend.limit.queued,
      },
    };
  }

  /** whether the request is the admin API's (whatever its token) */
  owns(req: IncomingMessage): boolean {
    const path = pathOf(req.url);
    return matchRoute(this.routes, req.method ?? 'GET', path) !== null || path.startsWith('/sessions/');
  }

  /** served before model-call authentication; false: not an admin path */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    const path = pathOf(req.url);
    const method = req.method ?? 'GET';
    if (!this.owns(req)) return false;
    try {
      if (!sameToken(presentedToken(req), this.token)) {
        res.setHeader('connection', 'close');
        req.resume();
        throw new HttpError(401, 'admin API: missing or wrong admin token', 'authentication_error');
      }
      if (await dispatch(this.routes, req, res, path)) return true;
      req.resume();
      throw new HttpError(405, `${method} ${path} is not an admin route`);
    } catch (error) {
      const reply = errorReply(error, 'polar serve');
      sendJson(res, reply.status, reply.body);
      return true;
    }
  }

  private live(id: string): Live {
    const live = this.sessions.get(id);
    if (live && !live.closing) live.activity.at = Date.now();
    if (!live || live.closing)
      throw new HttpError(404, `no open session ${encodeURIComponent(id)}`, 'not_found_error');
    return live;
  }

  /** POST /sessions: opens a capture session and tells the client how to point its harness at it */
  private async create(body: unknown): Promise<Record<string, unknown>> {
    const parsed = createSessionSchema.safeParse(body);
    if (!parsed.success) {
      const { field, message } = firstIssue(parsed.error);
      throw new HttpError(400, `${field}: ${message}`);
    }
    if (this.open().length + this.opening >= this.maxSessions) {
      throw new HttpError(
        429,
        `${this.maxSessions} sessions are open (--max-sessions): close finished ones with DELETE /sessions/:id`,
        'rate_limit_error',
      );
    }
    this.opening++;
    try {
      return await this.openOne(parsed.data);
    } finally {
      this.opening--;
    }
  }

  private async openOne(spec: z.infer<typeof createSessionSchema>): Promise<Record<string, unknown>> {
    const options = this.options;
    const url = this.url;
    const activity = { at: Date.now() };
    const profile = HARNESSES[spec.harness];
    const capture = openSession({
      profile,
      backend: this.backend,
      model: options.backend.model,
      output: join(this.captures, `${Date.now()}-${Math.random().toString(36).slice(2, 8)}.jsonl`),
      argv: spec.argv ?? [],
      cwd: process.cwd(),
      proxyUrl: url,
      ...(spec.task_id !== undefined ? { taskId: spec.task_id } : {}),
      ...(spec.sample !== undefined ? { sample: spec.sample } : {}),
      ...(spec.meta ? { meta: spec.meta } : {}),
      onCall: () => {
        activity.at = Date.now();
      },
    });
    const runDir = insideDir(this.captures, '.config', capture.proxy.id);
    await mkdirPrivate(runDir);
    const prepared = await profile.prepare({
      proxyUrl: url,
      key: capture.proxy.key,
      model: options.backend.model,
      runDir,
      argv: spec.argv ?? [],
      options: spec.harness_options ?? {},
    });
    capture.begin(prepared.argv, { served: true });
    this.proxy.addSession(capture.proxy);
    const live: Live = {
      capture,
      createdAt: new Date(),
      runDir,
      harness: profile.name,
      activity,
      closing: false,
    };
    this.sessions.set(capture.proxy.id, live);
    const files = await Promise.all(
      prepared.files.map(async (p) => ({ path: p, content: await readFile(p, 'utf8') })),
    );
    return {
      ...describe(live),
      key: capture.proxy.key,
      proxy_url: url,
      model: options.backend.model,
      env: Object.fromEntries(Object.entries(prepared.env).filter(([, v]) => v !== null)),
      unset_env: Object.entries(prepared.env)
        .filter(([, v]) => v === null)
        .map(([k]) => k),
      files,
    };
  }

  /**
   * DELETE /sessions/:id?exit_code=&status=&wait_s=: removes its key, waits for its calls in flight (up
   * to wait_s, default the call deadline, --backend-timeout: no call outlives it), cuts the ones still
   * running (recorded as `cut`), writes session_end.
   */
  private async close(live: Live, query: URLSearchParams): Promise<Record<string, unknown>> {
    const waitMs = this.closeWaitMs(query.get('wait_s'));
    live.closing = true;
    const exit = query.get('exit_code');
    const outcome = query.get('status');
    const unfinished = await this.proxy.retire(live.capture.proxy, waitMs);
    this.sessions.delete(live.capture.proxy.id);
    const exitCode = exit === null ? null : Number(exit);
    live.capture.end({
      exitCode: Number.isInteger(exitCode) ? exitCode : null,
      signal: null,
      status:
        outcome === 'error' || outcome === 'timeout'
          ? outcome
          : exitCode !== null && exitCode !== 0
            ? 'error'
            : 'completed',
      unfinished,
    });
    await rm(live.runDir, { recursive: true, force: true });
    return { ...describe(live), closed: true };
  }

  /** how long a closing session waits for its calls: `wait_s`, else the call deadline and a margin */
  private closeWaitMs(waitS: string | null): number {
    if (waitS !== null) {
      const s = Number(waitS);
      if (!(Number.isFinite(s) && s >= 0))
        throw new HttpError(
          400,
          `wait_s must be a number of seconds (0 or more), got ${JSON.stringify(waitS)}`,
        );
      return s * 1000;
    }
    return (this.options.backend.timeoutMs ?? DEFAULTS.backendTimeoutMs.value) + CLOSE_MARGIN_MS;
  }

  /** at shutdown: every open session ends as interrupted */
  async closeAll(): Promise<void> {
    clearInterval(this.sweeper);
    for (const live of this.sessions.values()) {
      const unfinished = this.proxy.activeCalls(live.capture.proxy.key);
      live.capture.end({ exitCode: null, signal: 'SIGTERM', status: 'interrupted', unfinished });
      await rm(live.runDir, { recursive: true, force: true });
    }
    this.sessions.clear();
    await rm(join(this.captures, '.config'), { recursive: true, force: true });
  }
}

function describe(live: Live): Record<string, unknown> {
  return {
    id: live.capture.proxy.id,
    harness: live.harness,
    capture: live.capture.output,
    created_at: live.createdAt.toISOString(),
    calls: live.capture.calls,
    errors: live.capture.errors,
    client_closed: live.capture.counters.clientClosed,
    cut_calls: live.capture.counters.cut,
    lost_calls: live.capture.counters.lost,
  };
}
