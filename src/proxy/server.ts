/**
 * The capture proxy: an HTTP server on 127.0.0.1 that authenticates each request by its per-session key,
 * converts it from the harness's wire API to the canonical form, asks the session's backend to generate,
 * streams the answer back in the harness's API, and appends one call record per model call.
 * One server can hold many sessions (polar capture uses one; polar serve many).
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Backend, CallRecorder } from '../backends/types.ts';
import type { CallRecord } from '../capture/record.ts';
import type { CaptureWriter } from '../capture/writer.ts';
import {
  type ApiName,
  type CanonicalRequest,
  type CanonicalResponse,
  fault,
  type ProxyFault,
  type StreamEvent,
  type TokenData,
} from '../protocols/canonical.ts';
import { ProtocolError } from '../protocols/errors.ts';
import { log } from '../util/log.ts';
import { DEFAULT_MAX_BODY_BYTES, readBody } from './body.ts';
import { anthropic, type FrontProtocol, PROTOCOLS, route } from './protocols.ts';
import { redactHeaders, redactSecrets } from './redact.ts';

export interface ProxySession {
  id: string;
  /** the per-session API key the harness must present */
  key: string;
  harness: string;
  /** the model the backend serves (every harness model name maps to it) */
  model: string;
  backend: Backend;
  writer: CaptureWriter;
  state: Map<string, unknown>;
  seq: number;
  calls: number;
  errors: number;
  /** harness-specific facts about a call (request kind, thread id) from headers and body */
  callMeta?: (headers: Record<string, string>, body: unknown) => Record<string, unknown>;
  onCall?: (record: CallRecord) => void;
}

export interface ProxyOptions {
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
  private readonly server: Server;
  private readonly sessions = new Map<string, ProxySession>();
  private readonly inflight = new Set<Promise<void>>();
  private readonly controllers = new Set<AbortController>();
  private readonly options: Required<Omit<ProxyOptions, 'admin'>> & Pick<ProxyOptions, 'admin'>;
  private accepting = true;
  /** requests in flight per session key */
  private readonly active = new Map<string, number>();
  /** requests refused for a missing or unknown key */
  unauthorized = 0;

  constructor(options: ProxyOptions = {}) {
    this.options = {
      host: options.host ?? '127.0.0.1',
      port: options.port ?? 0,
      maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
      admin: options.admin,
    };
    this.server = createServer((req, res) => {
      const done = this.handle(req, res).catch((error) => {
        log.debug(`proxy: unhandled error ${(error as Error)?.stack ?? error}`);
        if (!res.headersSent) {
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: 'internal proxy error', type: 'server_error' } }));
        } else res.end();
      });
      this.inflight.add(done);
      done.finally(() => this.inflight.delete(done));
    });
    this.server.keepAliveTimeout = 65_000;
    this.server.headersTimeout = 70_000;
    this.server.requestTimeout = 0;
  }

  async listen(): Promise<{ url: string; port: number; host: string }> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.options.port, this.options.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const address = this.server.address() as AddressInfo;
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return { url: `http://${host}:${address.port}`, port: address.port, host: address.address };
  }

  addSession(session: ProxySession): void {
    this.sessions.set(session.key, session);
  }

  removeSession(key: string): ProxySession | undefined {
    const session = this.sessions.get(key);
    this.sessions.delete(key);
    return session;
  }

  get inflightCount(): number {
    return this.inflight.size;
  }

  get sessionCount(): number {
    return this.sessions.size;
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
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const pending = Promise.allSettled([...this.inflight]);
    const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), graceMs).unref());
    if ((await Promise.race([pending.then(() => 'done' as const), timer])) === 'timeout') {
      for (const controller of this.controllers) controller.abort(new Error('proxy shutting down'));
      await Promise.race([pending, new Promise((r) => setTimeout(r, 2000).unref())]);
    }
    this.server.closeAllConnections();
    await closed;
  }

  private authenticate(req: IncomingMessage): ProxySession | undefined {
    const bearer = /^Bearer\s+(.+)$/i.exec(String(req.headers.authorization ?? ''))?.[1]?.trim();
    const key = bearer ?? (req.headers['x-api-key'] as string | undefined)?.trim();
    return key ? this.sessions.get(key) : undefined;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const r = route(req.method ?? 'GET', req.url ?? '/', req.headers);
    if (r.kind === 'health') return sendJson(res, 200, { ok: this.accepting });
    if (!this.accepting) {
      req.resume();
      res.setHeader('connection', 'close');
      const api = r.kind === 'model-call' || r.kind === 'unknown' ? r.api : 'openai-chat';
      const { status, body } = PROTOCOLS[api].renderError(
        fault('backend_error', 'polar is shutting down', 503),
      );
      return sendJson(res, status, body);
    }
    if (this.options.admin && (await this.options.admin(req, res))) return;
    const session = this.authenticate(req);
    const protocol =
      PROTOCOLS[r.kind === 'model-call' || r.kind === 'unknown' ? r.api : 'anthropic-messages'];
    if (!session) {
      this.unauthorized++;
      req.resume();
      const f = fault(
        'authentication',
        'missing or unknown API key: this proxy only serves the harness polar started',
      );
      const { status, body } = protocol.renderError(f);
      return sendJson(res, status, body);
    }
    if (r.kind === 'models') {
      req.resume();
      return sendJson(res, 200, modelList(session.model, 'anthropic-version' in req.headers));
    }
    if (r.kind === 'unknown') {
      req.resume();
      const { status, body } = protocol.renderError(
        fault('not_found', `no route for ${req.method} ${req.url}`),
      );
      return sendJson(res, status, body);
    }
    this.active.set(session.key, (this.active.get(session.key) ?? 0) + 1);
    const call = new CallInProgress(
      session,
      r.kind === 'count-tokens' ? 'anthropic-count-tokens' : r.api,
      req,
    );
    const controller = new AbortController();
    this.controllers.add(controller);
    res.on('close', () => {
      if (!res.writableFinished) controller.abort(new Error('harness closed the connection'));
    });
    try {
      if (r.kind === 'count-tokens') await this.countTokens(call, session, req, res, controller.signal);
      else await this.modelCall(call, session, PROTOCOLS[r.api], req, res, controller.signal);
    } finally {
      this.controllers.delete(controller);
      if (controller.signal.aborted && !call.error) {
        call.error = {
          kind: 'client_closed',
          message: String(controller.signal.reason?.message ?? 'aborted'),
          status: 499,
        };
      }
      call.finish(session);
      this.active.set(session.key, (this.active.get(session.key) ?? 1) - 1);
    }
  }

  private async readJson(
    call: CallInProgress,
    req: IncomingMessage,
  ): Promise<{ body: unknown } | { fault: ProxyFault }> {
    const read = await readBody(req, this.options.maxBodyBytes);
    if ('fault' in read) return read;
    call.bodyBytes = read.bytes.length;
    try {
      const body = JSON.parse(read.text) as unknown;
      call.requestBody = body;
      call.rawBody = read.bytes;
      return { body };
    } catch (error) {
      call.requestBody = read.text.slice(0, 4096);
      return {
        fault: fault('invalid_request', `request body is not valid JSON: ${(error as Error).message}`),
      };
    }
  }

  private async modelCall(
    call: CallInProgress,
    session: ProxySession,
    protocol: FrontProtocol,
    req: IncomingMessage,
    res: ServerResponse,
    signal: AbortSignal,
  ): Promise<void> {
    const fail = (f: ProxyFault) => call.fail(f, protocol.renderError, res);
    const read = await this.readJson(call, req);
    if ('fault' in read) return fail(read.fault);
    call.harnessMeta = session.callMeta?.(call.headers, read.body) ?? {};
    let canonical: CanonicalRequest;
    try {
      const converted = protocol.parseRequest(read.body);
      canonical = converted.value;
      call.warnings.push(...converted.warnings);
    } catch (error) {
      if (error instanceof ProtocolError) return fail(error.fault);
      throw error;
    }
    if (canonical.model !== session.model) canonical = { ...canonical, model: session.model };
    call.stream = canonical.stream;
    call.canonical = canonical;
    const created = Math.floor(Date.now() / 1000);
    const backendStart = performance.now();
    const events = session.backend
      .generate(canonical, {
        sessionId: session.id,
        callId: call.id,
        signal,
        recorder: call.recorder,
        sessionState: session.state,
      })
      [Symbol.asyncIterator]();

    // Decide the status before sending 200: read ahead until the first output (or the end).
    const head: StreamEvent[] = [];
    let next = await events.next();
    while (!next.done && next.value.type === 'start') {
      // the turn's round-trip key (see token-capture.md): minted before streaming so writers can emit it
      // with the reasoning block; a backend that splices mints its own
      head.push({ ...next.value, reasoningSignature: next.value.reasoningSignature ?? `polar.${call.id}` });
      next = await events.next();
    }
    if (next.done) return fail(fault('backend_error', 'backend stream ended before any output'));
    if (next.value.type === 'error') {
      call.backendMs = performance.now() - backendStart;
      return fail(next.value.error);
    }
    head.push(next.value);

    let final: CanonicalResponse | undefined;
    let streamFault: ProxyFault | undefined;
    if (canonical.stream) {
      const writer = protocol.createStreamWriter({ created, body: read.body });
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
        'x-polar-call-id': call.id,
      });
      res.flushHeaders();
      call.ttfb = performance.now() - call.t0;
      // events decoded from one network read arrive in one turn of the event loop: cork the socket and
      // uncork on the next turn, so they leave in one write instead of one syscall per token
      let corked = false;
      const emit = (event: StreamEvent) => {
        if (event.type === 'finish') final = event.response;
        if (event.type === 'error') streamFault = event.error;
        const text = writer.write(event.type === 'finish' ? withSignature(event, head) : event);
        if (!text || res.destroyed) return;
        if (!corked) {
          corked = true;
          res.cork();
          setImmediate(() => {
            corked = false;
            res.uncork();
          });
        }
        res.write(text);
      };
      for (const event of head) emit(event);
      while (!streamFault && !final) {
        next = await events.next();
        if (next.done) break;
        emit(next.value);
      }
      if (!final && !streamFault) {
        streamFault = fault('backend_error', 'backend stream ended without a finish');
        emit({ type: 'error', error: streamFault });
      }
      res.end();
    } else {
      for (const event of head) {
        if (event.type === 'finish') final = event.response;
        if (event.type === 'error') streamFault = event.error;
      }
      while (!final && !streamFault) {
        next = await events.next();
        if (next.done) break;
        if (next.value.type === 'finish') final = next.value.response;
        if (next.value.type === 'error') streamFault = next.value.error;
      }
      call.backendMs = performance.now() - backendStart;
      if (!final) return fail(streamFault ?? fault('backend_error', 'backend stream ended without a finish'));
      final = (withSignature({ type: 'finish', response: final }, head) as { response: CanonicalResponse })
        .response;
      const body = protocol.renderResponse(final, { created });
      call.ttfb = performance.now() - call.t0;
      call.response = { status: 200, body };
      sendJson(res, 200, body, { 'x-polar-call-id': call.id });
    }
    await events.return?.(undefined);
    call.backendMs ??= performance.now() - backendStart;
    if (final) {
      call.final = final;
      if (!call.response) call.response = { status: 200, body: protocol.renderResponse(final, { created }) };
    }
    if (streamFault) {
      call.error = { kind: streamFault.kind, message: streamFault.message, status: streamFault.status };
      call.response ??= { status: 200, body: protocol.renderError(streamFault).body };
    }
  }

  private async countTokens(
    call: CallInProgress,
    session: ProxySession,
    req: IncomingMessage,
    res: ServerResponse,
    signal: AbortSignal,
  ): Promise<void> {
    const fail = (f: ProxyFault) => call.fail(f, anthropic.renderError, res);
    const read = await this.readJson(call, req);
    if ('fault' in read) return fail(read.fault);
    let canonical: CanonicalRequest;
    try {
      canonical = { ...anthropic.parseCountTokensRequest(read.body).value, model: session.model };
    } catch (error) {
      if (error instanceof ProtocolError) return fail(error.fault);
      throw error;
    }
    call.canonical = canonical;
    const counted = await session.backend.countTokens(canonical, {
      sessionId: session.id,
      callId: call.id,
      signal,
      recorder: call.recorder,
      sessionState: session.state,
    });
    if (!counted.exact) call.warnings.push('count_tokens is an estimate: the backend cannot count tokens');
    const body = anthropic.renderCountTokens(counted.tokens);
    call.response = { status: 200, body };
    call.ttfb = performance.now() - call.t0;
    sendJson(res, 200, body);
  }
}

/** The state of one call while it runs; becomes one call record. */
class CallInProgress {
  readonly id = `call_${randomUUID()}`;
  readonly t0 = performance.now();
  readonly startedAt = new Date();
  readonly headers: Record<string, string>;
  readonly method: string;
  readonly path: string;
  readonly warnings: string[] = [];
  readonly backendInfo: Record<string, unknown> = {};
  requestBody: unknown = null;
  /** the body bytes as received, when they parsed as JSON */
  rawBody: Buffer | null = null;
  bodyBytes = 0;
  stream = false;
  canonical: CanonicalRequest | null = null;
  backendRequest: { url: string; body: unknown } | null = null;
  tokens: TokenData = { promptTokenIds: null, completionTokenIds: null, completionLogprobs: null };
  final: CanonicalResponse | null = null;
  response: { status: number; body: unknown } | null = null;
  error: { kind: string; message: string; status: number } | null = null;
  harnessMeta: Record<string, unknown> = {};
  ttfb: number | null = null;
  backendMs: number | null = null;
  readonly recorder: CallRecorder;

  constructor(
    readonly session: ProxySession,
    readonly api: CallRecord['api'] | ApiName,
    req: IncomingMessage,
  ) {
    this.headers = redactHeaders(req.headers);
    this.method = req.method ?? 'POST';
    this.path = req.url ?? '/';
    this.recorder = {
      backendRequest: (url, body) => {
        this.backendRequest = { url, body };
      },
      tokens: (data) => {
        this.tokens = data;
      },
      warn: (message) => {
        this.warnings.push(message);
      },
      annotate: (key, value) => {
        this.backendInfo[key] = value;
      },
    };
  }

  /** Answers the harness with a fault in its API's error shape, and records it. */
  fail(
    f: ProxyFault,
    render: (f: ProxyFault) => { status: number; body: unknown },
    res: ServerResponse,
  ): void {
    this.error = { kind: f.kind, message: f.message, status: f.status };
    const { status, body } = render(f);
    this.response = { status, body };
    sendJson(res, status, body);
  }

  /**
   * The record as the pieces of one JSONL line. The harness's request body goes in as the bytes it
   * arrived as (valid JSON: it parsed) instead of being serialised and encoded again, unless it spans
   * lines or holds the session key.
   */
  private serialise(record: CallRecord, key: string): Buffer[] | string {
    const raw = this.rawBody;
    if (raw === null || raw.includes(10) || raw.includes(13) || raw.includes(key))
      return JSON.stringify(record);
    const line = JSON.stringify({ ...record, request: { ...record.request, body: RAW_BODY } });
    const at = line.indexOf(RAW_BODY_JSON);
    if (at < 0) return JSON.stringify(record);
    return [Buffer.from(line.slice(0, at)), raw, Buffer.from(line.slice(at + RAW_BODY_JSON.length))];
  }

  finish(session: ProxySession): void {
    const seq = session.seq++;
    const tokenExact =
      session.backend.tokenExact &&
      this.error === null &&
      this.tokens.promptTokenIds !== null &&
      this.tokens.completionTokenIds !== null &&
      this.tokens.inexact === undefined;
    const record: CallRecord = {
      v: 1,
      type: 'call',
      id: this.id,
      session: session.id,
      seq,
      api: this.api,
      harness: session.harness,
      stream: this.stream,
      started_at: this.startedAt.toISOString(),
      ended_at: new Date().toISOString(),
      timings: {
        ttfb_ms: this.ttfb === null ? null : round(this.ttfb),
        backend_ms: this.backendMs === null ? null : round(this.backendMs),
        total_ms: round(performance.now() - this.t0),
      },
      request: { method: this.method, path: this.path, headers: this.headers, body: this.requestBody },
      response: this.response ?? { status: 0, body: null },
      canonical_request: this.canonical,
      canonical_response: this.final,
      backend_request: this.backendRequest,
      prompt_token_ids: this.tokens.promptTokenIds,
      completion_token_ids: this.tokens.completionTokenIds,
      completion_logprobs: this.tokens.completionLogprobs,
      finish_reason: this.final?.finishReason ?? (this.error ? 'error' : null),
      usage: this.final
        ? {
            prompt_tokens: this.final.usage.promptTokens,
            completion_tokens: this.final.usage.completionTokens,
          }
        : null,
      token_exact: tokenExact,
      warnings: this.warnings,
      harness_meta: this.harnessMeta,
      backend_info: this.backendInfo,
      error: this.error,
    };
    session.calls++;
    if (this.error) session.errors++;
    // serialise once; the per-session key is scrubbed from the text only if it appears at all (rare:
    // a harness echoing its own env), which keeps the hot path to one JSON.stringify
    let line = this.serialise(record, session.key);
    let clean = record;
    if (
      Array.isArray(line)
        ? line[0]!.includes(session.key) || line[2]!.includes(session.key)
        : line.includes(session.key)
    ) {
      clean = redactSecrets(record, [session.key]);
      line = JSON.stringify(clean);
    }
    try {
      session.writer.writeLine(line);
    } catch (error) {
      log.error(`could not write the call record to ${session.writer.path}: ${(error as Error).message}`);
    }
    session.onCall?.(clean);
  }
}

function withSignature(event: Extract<StreamEvent, { type: 'finish' }>, head: StreamEvent[]): StreamEvent {
  const start = head.find((e) => e.type === 'start');
  const signature = start?.type === 'start' ? start.reasoningSignature : undefined;
  if (event.response.reasoningSignature || !signature) return event;
  event.response.reasoningSignature = signature;
  return event;
}

const RAW_BODY = '\u0000polar-raw-body\u0000';
const RAW_BODY_JSON = JSON.stringify(RAW_BODY);

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) {
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

function modelList(model: string, anthropicStyle: boolean): unknown {
  const created = Math.floor(Date.now() / 1000);
  if (anthropicStyle) {
    return {
      data: [{ type: 'model', id: model, display_name: model, created_at: new Date().toISOString() }],
      has_more: false,
      first_id: model,
      last_id: model,
    };
  }
  return { object: 'list', data: [{ id: model, object: 'model', created, owned_by: 'polar' }] };
}
