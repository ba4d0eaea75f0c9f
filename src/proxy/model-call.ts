/**
 * The steps of one model call: read the body, convert it to the canonical request, start the backend
 * and read ahead to the first output (so the status is decided before 200 is sent), then stream or
 * buffer the answer in the harness's API. Each step records what it learned on the CallInProgress.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Backend } from '../backends/types.ts';
import { type BodyClaim, RETRY_AFTER_S, readBody } from '../http/body.ts';
import { sendJson } from '../http/reply.ts';
import {
  type CanonicalRequest,
  type CanonicalResponse,
  type Converted,
  fault,
  type ProxyFault,
  type StreamEvent,
} from '../protocols/canonical.ts';
import { ProtocolError } from '../protocols/errors.ts';
import type { FrontProtocol, RequestTarget } from '../protocols/front.ts';
import { parseJsonBody } from '../util/json-body.ts';
import { depthProblemMessage } from '../util/json-depth.ts';
import { log } from '../util/log.ts';
import type { CallInProgress } from './call.ts';

/** What a step needs of the call around it. */
export interface CallScope {
  call: CallInProgress;
  session: { id: string; model: string; backend: Backend; state: Map<string, unknown> };
  protocol: FrontProtocol;
  req: IncomingMessage;
  res: ServerResponse;
  signal: AbortSignal;
  maxBodyBytes: number;
  /** the call's share of the server's body budget (held until the call is over) */
  bodyClaim?: BodyClaim;
}

type Events = AsyncIterator<StreamEvent, unknown, undefined>;

/** Answers the harness with a fault in its API's error shape, and records it. */
function fail(scope: CallScope, f: ProxyFault): void {
  scope.call.error = { kind: f.kind, message: f.message, status: f.status };
  const { status, body } = scope.protocol.renderError(f);
  scope.call.response = { status, body };
  // a body refused unread: the connection closes after the answer, which says when to come back
  const headers: Record<string, string> =
    f.kind === 'overloaded' ? { 'retry-after': String(RETRY_AFTER_S), connection: 'close' } : {};
  sendJson(scope.res, status, body, headers);
}

/** Reads and parses the JSON body; the raw bytes are kept for the record. */
export async function readJsonBody(scope: CallScope): Promise<{ body: unknown } | { fault: ProxyFault }> {
  const { call } = scope;
  const read = await readBody(scope.req, scope.maxBodyBytes, scope.bodyClaim);
  if ('error' in read) {
    const e = read.error;
    const kind = e.kind === 'too_large' ? 'too_large' : e.kind === 'busy' ? 'overloaded' : 'invalid_request';
    return { fault: fault(kind, e.message, e.status) };
  }
  try {
    const parsed = parseJsonBody(read.bytes);
    if ('deep' in parsed) {
      // refused before anything walks it (conversion, the record's serialisation would overflow the stack)
      call.requestBody = read.text.slice(0, 4096);
      return { fault: fault('invalid_request', depthProblemMessage()) };
    }
    const body = parsed.value;
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

/** The canonical request for the session's model, or the protocol's fault. */
function toCanonical(
  scope: CallScope,
  parse: (body: unknown, target: RequestTarget) => Converted<CanonicalRequest>,
  body: unknown,
  keepWarnings = true,
): { request: CanonicalRequest } | { fault: ProxyFault } {
  try {
    const converted = parse(body, { path: scope.req.url ?? '/' });
    if (keepWarnings) scope.call.warnings.push(...converted.warnings);
    const request = converted.value;
    const model = scope.session.model;
    return { request: request.model === model ? request : { ...request, model } };
  } catch (error) {
    if (error instanceof ProtocolError) return { fault: error.fault };
    throw error;
  }
}

function backendContext(scope: CallScope) {
  return {
    sessionId: scope.session.id,
    callId: scope.call.id,
    signal: scope.signal,
    recorder: scope.call.recorder,
    sessionState: scope.session.state,
  };
}

/**
 * How many times a call that a weight update aborted (`polar loop --weight-sync-pause abort`) is sent again
 * once the update is over, when nothing of it had reached the harness yet.
 */
const UPDATE_RETRIES = 3;

/** POST /v1/messages, /v1/responses, /v1/chat/completions, /v1beta/models/{model}:(stream)generateContent */
export async function modelCall(scope: CallScope): Promise<void> {
  const { call } = scope;
  const read = await readJsonBody(scope);
  if ('fault' in read) return fail(scope, read.fault);
  const converted = toCanonical(scope, scope.protocol.parseRequest, read.body);
  if ('fault' in converted) return fail(scope, converted.fault);
  const canonical = converted.request;
  call.stream = canonical.stream;
  call.canonical = canonical;
  const created = Math.floor(Date.now() / 1000);
  const { backend } = scope.session;
  const updates = backend.weightUpdates;
  for (let attempt = 1; ; attempt++) {
    // polar loop: the version published when the call starts, and where it stands against the weight
    // updates (a `keep` update during the call adds its version; src/backends/weight-updates.ts)
    const mark = updates?.mark();
    const version = backend.policyVersion;
    if (version !== undefined) call.policyVersion = version;
    const outcome = await attemptCall(scope, canonical, created, read.body);
    // (a backend polar reloads itself, the embedded one: the version it served when the call started)
    call.polarVersions =
      updates && mark ? updates.versionsOf(mark, version) : version === undefined ? [] : [version];
    const cut = outcome.aborted && updates !== undefined && mark !== undefined && updates.abortedSince(mark);
    if (outcome.unsent === null) {
      // already streaming to the harness when a weight update cut it: failed through no doing of the agent's
      if (cut) call.backendInfo.weight_update_cut = true;
      return;
    }
    // the server cut the call for a weight update before anything of it reached the harness: it is sent
    // again once the server serves the new weights, and the harness gets that answer
    if (cut && attempt <= UPDATE_RETRIES) {
      call.backendInfo.weight_update_retries = attempt;
      await updates!.settled();
      continue;
    }
    if (cut) call.backendInfo.weight_update_cut = true;
    return fail(scope, outcome.unsent);
  }
}

/**
 * One attempt at the backend. `unsent`: the fault to answer with, nothing of the call having reached the
 * harness yet; null when the call was answered (or failed after its answer had begun). `aborted`: the
 * server aborted the generation (finish_reason abort), before or after the answer began.
 */
async function attemptCall(
  scope: CallScope,
  canonical: CanonicalRequest,
  created: number,
  body: unknown,
): Promise<{ unsent: ProxyFault | null; aborted: boolean }> {
  const { call } = scope;
  const backendStart = performance.now();
  const events = scope.session.backend.generate(canonical, backendContext(scope))[Symbol.asyncIterator]();
  try {
    const head = await readAhead(call, events);
    if ('fault' in head) {
      // an error event is the backend's answer (timed); a stream that just ended has no backend time
      if (head.answered) call.backendMs = performance.now() - backendStart;
      return { unsent: head.fault, aborted: head.fault.aborted === true };
    }
    const { final, streamFault } = canonical.stream
      ? await streamOut(scope, events, head, created, body)
      : await bufferOut(events, head);
    call.backendMs = performance.now() - backendStart;
    const aborted = streamFault?.aborted === true;
    if (!canonical.stream && !final)
      return {
        unsent: streamFault ?? fault('backend_error', 'backend stream ended without a finish'),
        aborted,
      };
    settle(scope, final, streamFault, created);
    return { unsent: null, aborted };
  } finally {
    // every path closes the backend's event stream: its finally blocks (the in-flight slot of
    // proxy/limits.ts, the backend's own request) run even when the call ended early; a failure
    // there must not hide the call's own outcome
    await Promise.resolve(events.return?.(undefined)).catch((error: unknown) =>
      log.debug(`proxy: closing the backend stream of ${call.id}: ${(error as Error)?.message ?? error}`),
    );
  }
}

/**
 * Reads the backend's events up to the first output: the head to replay, or the fault to answer with.
 * The turn's round-trip key (see token-capture.md) is minted here so writers can emit it with the
 * reasoning block; a backend that splices mints its own.
 */
async function readAhead(
  call: CallInProgress,
  events: Events,
): Promise<StreamEvent[] | { fault: ProxyFault; answered: boolean }> {
  const head: StreamEvent[] = [];
  let next = await events.next();
  while (!next.done && next.value.type === 'start') {
    head.push({ ...next.value, reasoningSignature: next.value.reasoningSignature ?? `polar.${call.id}` });
    next = await events.next();
  }
  if (next.done)
    return { fault: fault('backend_error', 'backend stream ended before any output'), answered: false };
  if (next.value.type === 'error') return { fault: next.value.error, answered: true };
  head.push(next.value);
  return head;
}

interface Outcome {
  final: CanonicalResponse | undefined;
  streamFault: ProxyFault | undefined;
}

/** Streams the answer as server-sent events in the harness's API; a fault mid-stream ends it. */
async function streamOut(
  scope: CallScope,
  events: Events,
  head: StreamEvent[],
  created: number,
  body: unknown,
): Promise<Outcome> {
  const { call, res } = scope;
  const out: Outcome = { final: undefined, streamFault: undefined };
  const writer = scope.protocol.createStreamWriter({ created, body });
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-polar-call-id': call.id,
  });
  call.ttfb = performance.now() - call.t0;
  // events decoded from one network read arrive in one turn of the event loop: their text is joined and
  // written once on the next turn (one chunk, one syscall, the headers in the same packet as the first
  // events) instead of one chunked write per token
  let pending = '';
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending && !res.destroyed) res.write(pending);
    pending = '';
  };
  const emit = (event: StreamEvent) => {
    if (event.type === 'finish') out.final = event.response;
    if (event.type === 'error') out.streamFault = event.error;
    const text = writer.write(event.type === 'finish' ? withSignature(event, head) : event);
    if (!text || res.destroyed) return;
    pending += text;
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
  for (const event of head) emit(event);
  while (!out.streamFault && !out.final) {
    const next = await events.next();
    if (next.done) break;
    emit(next.value);
  }
  if (!out.final && !out.streamFault) {
    out.streamFault = fault('backend_error', 'backend stream ended without a finish');
    emit({ type: 'error', error: out.streamFault });
  }
  // the rest goes out with the end of the response
  const rest = pending;
  pending = '';
  if (rest && !res.destroyed) res.end(rest);
  else res.end();
  return out;
}

/** Collects the answer and sends it as one JSON body (when it finished). */
async function bufferOut(events: Events, head: StreamEvent[]): Promise<Outcome> {
  const out: Outcome = { final: undefined, streamFault: undefined };
  const take = (event: StreamEvent) => {
    if (event.type === 'finish') out.final = event.response;
    if (event.type === 'error') out.streamFault = event.error;
  };
  for (const event of head) take(event);
  while (!out.final && !out.streamFault) {
    const next = await events.next();
    if (next.done) break;
    take(next.value);
  }
  if (!out.final) return out;
  const final = (
    withSignature({ type: 'finish', response: out.final }, head) as { response: CanonicalResponse }
  ).response;
  return { final, streamFault: out.streamFault };
}

/** Records the outcome; a buffered answer is sent here. */
function settle(
  scope: CallScope,
  final: CanonicalResponse | undefined,
  streamFault: ProxyFault | undefined,
  created: number,
): void {
  const { call, protocol } = scope;
  if (final) {
    call.final = final;
    const body = protocol.renderResponse(final, { created });
    call.response = { status: 200, body };
    if (!call.stream) {
      call.ttfb = performance.now() - call.t0;
      sendJson(scope.res, 200, body, { 'x-polar-call-id': call.id });
    }
  }
  if (streamFault) {
    call.error = { kind: streamFault.kind, message: streamFault.message, status: streamFault.status };
    call.response ??= { status: 200, body: protocol.renderError(streamFault).body };
  }
}

/** POST /v1/messages/count_tokens (Anthropic), /v1beta/models/{model}:countTokens: the backend's prompt token count. */
export async function countTokensCall(scope: CallScope): Promise<void> {
  const endpoint = scope.protocol.countTokens;
  if (!endpoint) throw new Error(`${scope.protocol.api} has no token-count endpoint`);
  const { call } = scope;
  const read = await readJsonBody(scope);
  if ('fault' in read) return fail(scope, read.fault);
  // (a token count's conversion warnings were never recorded: the record format stays as it was)
  const converted = toCanonical(scope, endpoint.parseRequest, read.body, false);
  if ('fault' in converted) return fail(scope, converted.fault);
  const canonical = converted.request;
  call.canonical = canonical;
  const counted = await scope.session.backend.countTokens(canonical, backendContext(scope));
  if (!counted.exact) call.warnings.push('count_tokens is an estimate: the backend cannot count tokens');
  const body = endpoint.render(counted.tokens);
  call.response = { status: 200, body };
  call.ttfb = performance.now() - call.t0;
  sendJson(scope.res, 200, body);
}

function withSignature(event: Extract<StreamEvent, { type: 'finish' }>, head: StreamEvent[]): StreamEvent {
  const start = head.find((e) => e.type === 'start');
  const signature = start?.type === 'start' ? start.reasoningSignature : undefined;
  if (event.response.reasoningSignature || !signature) return event;
  event.response.reasoningSignature = signature;
  return event;
}
