/**
 * `polar serve`: one long-running capture proxy for many concurrent rollouts. Sessions are created and
 * closed over a small admin API; every model call is routed to its session by its key, exactly as in
 * `polar capture` (the same ProxyServer and session code). Backend calls are bounded per backend and
 * queued beyond the bound; SIGTERM stops accepting, finishes calls in flight, flushes and exits.
 */
import { mkdir, readFile, rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { createBackend } from '../backends/index.ts';
import type { BackendOptions } from '../backends/types.ts';
import { firstIssue } from '../capture/reader.ts';
import { type CaptureSession, openSession } from '../capture/session.ts';
import { HARNESSES } from '../harnesses/index.ts';
import { HARNESS_NAMES } from '../harnesses/types.ts';
import { limitBackend } from '../proxy/limits.ts';
import { ProxyServer } from '../proxy/server.ts';

export interface ServeOptions {
  backend: BackendOptions;
  host?: string;
  port?: number;
  /** directory for capture files (one per session) */
  captures: string;
  /** backend calls in flight at most; the rest queue */
  maxInflight?: number;
  /** when set, the admin API requires `Authorization: Bearer <token>` */
  adminToken?: string;
  maxBodyBytes?: number;
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
}

export interface Served {
  url: string;
  /** stops accepting, waits for calls in flight, closes every open session as interrupted */
  close(graceMs?: number): Promise<void>;
  status(): Record<string, unknown>;
}

export async function startServe(options: ServeOptions): Promise<Served> {
  const backend = limitBackend(await createBackend(options.backend), options.maxInflight ?? 64);
  const captures = resolve(options.captures);
  await mkdir(captures, { recursive: true });
  const sessions = new Map<string, Live>();
  const startedAt = Date.now();
  let url = '';

  const status = () => ({
    accepting: true,
    uptime_s: Math.round((Date.now() - startedAt) / 1000),
    sessions: sessions.size,
    requests_in_flight: proxy.inflightCount,
    backend: {
      kind: backend.kind,
      url: backend.url,
      max_inflight: backend.limit.max,
      inflight: backend.limit.inflight,
      queued: backend.limit.queued,
    },
  });

  const describe = (live: Live) => ({
    id: live.capture.proxy.id,
    harness: live.harness,
    capture: live.capture.output,
    created_at: live.createdAt.toISOString(),
    calls: live.capture.proxy.calls,
    errors: live.capture.proxy.errors,
  });

  const admin = async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const path = (req.url ?? '/').split('?')[0]!.replace(/\/+$/, '');
    const isAdmin = path === '/status' || path === '/sessions' || path.startsWith('/sessions/');
    if (!isAdmin) return false;
    if (options.adminToken && req.headers.authorization !== `Bearer ${options.adminToken}`) {
      req.resume();
      send(res, 401, {
        error: { message: 'admin API: missing or wrong admin token', type: 'authentication_error' },
      });
      return true;
    }
    const method = req.method ?? 'GET';
    if (path === '/status' && method === 'GET') {
      req.resume();
      send(res, 200, status());
      return true;
    }
    if (path === '/sessions' && method === 'GET') {
      req.resume();
      send(res, 200, { sessions: [...sessions.values()].map(describe) });
      return true;
    }
    if (path === '/sessions' && method === 'POST') {
      let body: unknown = {};
      const text = await readText(req);
      if (text.trim()) {
        try {
          body = JSON.parse(text);
        } catch {
          send(res, 400, { error: { message: 'body is not valid JSON', type: 'invalid_request_error' } });
          return true;
        }
      }
      const parsed = createSessionSchema.safeParse(body);
      if (!parsed.success) {
        const { field, message } = firstIssue(parsed.error);
        send(res, 400, { error: { message: `${field}: ${message}`, type: 'invalid_request_error' } });
        return true;
      }
      const spec = parsed.data;
      const profile = HARNESSES[spec.harness];
      const capture = openSession({
        profile,
        backend,
        model: options.backend.model,
        output: join(captures, `${Date.now()}-${Math.random().toString(36).slice(2, 8)}.jsonl`),
        argv: spec.argv ?? [],
        cwd: process.cwd(),
        proxyUrl: url,
        ...(spec.task_id !== undefined ? { taskId: spec.task_id } : {}),
        ...(spec.sample !== undefined ? { sample: spec.sample } : {}),
        ...(spec.meta ? { meta: spec.meta } : {}),
      });
      const runDir = join(captures, '.config', capture.proxy.id);
      await mkdir(runDir, { recursive: true });
      const prepared = await profile.prepare({
        proxyUrl: url,
        key: capture.proxy.key,
        model: options.backend.model,
        runDir,
        argv: spec.argv ?? [],
        options: spec.harness_options ?? {},
      });
      capture.begin(prepared.argv, { served: true });
      proxy.addSession(capture.proxy);
      const live: Live = { capture, createdAt: new Date(), runDir, harness: profile.name };
      sessions.set(capture.proxy.id, live);
      const files = await Promise.all(
        prepared.files.map(async (p) => ({ path: p, content: await readFile(p, 'utf8') })),
      );
      send(res, 201, {
        ...describe(live),
        key: capture.proxy.key,
        proxy_url: url,
        model: options.backend.model,
        env: Object.fromEntries(Object.entries(prepared.env).filter(([, v]) => v !== null)),
        unset_env: Object.entries(prepared.env)
          .filter(([, v]) => v === null)
          .map(([k]) => k),
        files,
      });
      return true;
    }
    const m = /^\/sessions\/([^/]+)$/.exec(path);
    if (m) {
      req.resume();
      const live = sessions.get(decodeURIComponent(m[1]!));
      if (!live) {
        send(res, 404, { error: { message: `no open session ${m[1]}`, type: 'not_found_error' } });
        return true;
      }
      if (method === 'GET') {
        send(res, 200, describe(live));
        return true;
      }
      if (method === 'DELETE') {
        const query = new URL(req.url ?? '/', 'http://x').searchParams;
        const exit = query.get('exit_code');
        const outcome = query.get('status');
        proxy.removeSession(live.capture.proxy.key);
        await proxy.drain(live.capture.proxy);
        sessions.delete(live.capture.proxy.id);
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
        });
        await rm(live.runDir, { recursive: true, force: true });
        send(res, 200, { ...describe(live), closed: true });
        return true;
      }
    }
    req.resume();
    send(res, 405, {
      error: { message: `${method} ${path} is not an admin route`, type: 'invalid_request_error' },
    });
    return true;
  };

  const proxy = new ProxyServer({
    ...(options.host ? { host: options.host } : {}),
    port: options.port ?? 8100,
    ...(options.maxBodyBytes ? { maxBodyBytes: options.maxBodyBytes } : {}),
    admin,
  });
  url = (await proxy.listen()).url;

  return {
    url,
    status,
    async close(graceMs = 30_000) {
      await proxy.close(graceMs);
      for (const live of sessions.values()) {
        live.capture.end({ exitCode: null, signal: 'SIGTERM', status: 'interrupted' });
        await rm(live.runDir, { recursive: true, force: true });
      }
      sessions.clear();
      await rm(join(captures, '.config'), { recursive: true, force: true });
      await backend.close();
    },
  };
}

async function readText(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > 1024 * 1024) throw new Error('admin request body over 1 MiB');
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
