/**
 * Shared HTTP plumbing for backends: one JSON POST over node:http with keep-alive connections, that turns
 * transport faults into ProxyFaults. (node:http rather than fetch: on the proxy's hot path fetch's web
 * streams, header lists and body copies cost about half of the proxy's CPU per call in a profile of
 * `npm run bench -- proxy`, and most of its garbage.)
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { fault, type ProxyFault } from '../protocols/canonical.ts';
import { SseDecoder, type SseEvent, SseEventTooLarge } from '../protocols/sse.ts';
import { CallDeadline } from './deadline.ts';

/** The part of a fetch Response the backends use. */
export interface BackendResponse {
  ok: boolean;
  status: number;
  headers: { get(name: string): string | null };
  /** the body as it arrives; leaving the iteration early closes the connection */
  body: AsyncIterable<Uint8Array>;
  text(): Promise<string>;
  json(): Promise<unknown>;
}

export type FetchOutcome = { ok: true; response: BackendResponse } | { ok: false; fault: ProxyFault };

// an idle connection is closed after 4 s (undici's default, below the 5 s idle timeout of uvicorn and
// most servers), so a call never lands on a socket the server is closing; a call in progress is not
// affected (the agent's timeout only ends free sockets)
const agents = {
  http: new HttpAgent({ keepAlive: true, timeout: 4000 }),
  https: new HttpsAgent({ keepAlive: true, timeout: 4000 }),
};

/** The error an aborted call fails with: the signal's reason, as fetch rejects with it. */
function abortReason(signal: AbortSignal, error: unknown): unknown {
  return signal.aborted ? (signal.reason ?? error) : error;
}

function send(
  url: string,
  payload: string,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const https = u.protocol === 'https:';
    const req = (https ? httpsRequest : httpRequest)(
      u,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': Buffer.byteLength(payload) },
        agent: https ? agents.https : agents.http,
        signal,
      },
      resolve,
    );
    req.on('error', (error) => reject(abortReason(signal, error)));
    req.end(payload);
  });
}

function wrap(res: IncomingMessage, signal: AbortSignal): BackendResponse {
  const status = res.statusCode ?? 0;
  const body: AsyncIterable<Uint8Array> = {
    async *[Symbol.asyncIterator]() {
      try {
        for await (const chunk of res) yield chunk as Buffer;
      } catch (error) {
        throw abortReason(signal, error);
      }
    },
  };
  const text = async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };
  return {
    ok: status >= 200 && status < 300,
    status,
    headers: {
      get: (name) => {
        const value = res.headers[name.toLowerCase()];
        return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
      },
    },
    body,
    text,
    json: async () => JSON.parse(await text()) as unknown,
  };
}

/**
 * POSTs JSON. With a `deadline` (the call's, which the caller holds and disposes of for the whole call),
 * reading the body after this returns stays under its total and idle limits; with `timeoutMs`, one
 * timeout covers the request and the body read right after it (server-info routes, probes).
 */
export async function postJson(
  url: string,
  body: unknown,
  options:
    | { deadline: CallDeadline; headers?: Record<string, string> }
    | { signal?: AbortSignal; timeoutMs: number; headers?: Record<string, string> },
): Promise<FetchOutcome> {
  const deadline = 'deadline' in options ? options.deadline : undefined;
  const timeout = 'deadline' in options ? undefined : AbortSignal.timeout(options.timeoutMs);
  const signal =
    deadline?.signal ??
    ('signal' in options && options.signal ? AbortSignal.any([options.signal, timeout!]) : timeout!);
  try {
    const res = await send(
      url,
      JSON.stringify(body),
      {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...options.headers,
      },
      signal,
    );
    deadline?.touch();
    const response = wrap(res, signal);
    if (!response.ok) {
      const text = await response.text().catch(() => '');
      return { ok: false, fault: upstreamFault(url, response.status, text) };
    }
    return { ok: true, response };
  } catch (error) {
    return {
      ok: false,
      fault: deadline
        ? transportFault(url, error, deadline)
        : transportFault(url, error, timeout!.aborted, (options as { timeoutMs: number }).timeoutMs),
    };
  }
}

/**
 * The fault for a failed request or body read: a passed limit (the call's deadline, or a plain timeout),
 * an SSE event over the decoder's bound, the harness leaving, or the network.
 */
export function transportFault(
  url: string,
  error: unknown,
  limit?: CallDeadline | boolean,
  timeoutMs?: number,
): ProxyFault {
  if (limit instanceof CallDeadline && limit.timedOut) return limit.fault(url);
  if (limit === true) return fault('backend_timeout', `backend ${url} did not answer within ${timeoutMs} ms`);
  if (error instanceof SseEventTooLarge)
    return fault('backend_error', `backend ${url} sent a stream event over ${error.limit} characters`);
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  const name = (error as Error)?.name;
  if (name === 'AbortError') return fault('backend_error', `backend call to ${url} was cancelled`, 499);
  return fault(
    'backend_unreachable',
    `backend ${url} unreachable: ${cause?.code ?? (error as { code?: string })?.code ?? cause?.message ?? (error as Error)?.message ?? String(error)}`,
  );
}

/**
 * The message of an inference server's error body: current vLLM nests it (`{"error": {"message", "type",
 * "param", "code"}}`, vllm/entrypoints/openai/engine/protocol.py ErrorResponse), older vLLM is flat
 * (`{"object": "error", "message": ...}`), SGLang's /generate answers `{"error": {"message"}}`,
 * FastAPI's own errors `{"detail": ...}`. An HTML page or other text is cut to a line.
 */
export function errorDetail(text: string): string {
  try {
    const parsed = JSON.parse(text) as {
      error?: { message?: unknown } | string;
      message?: unknown;
      detail?: unknown;
    };
    const nested = typeof parsed.error === 'string' ? parsed.error : parsed.error?.message;
    const found = nested ?? parsed.message ?? parsed.detail;
    if (typeof found === 'string') return found;
    if (found !== undefined) return JSON.stringify(found).slice(0, 500);
  } catch {}
  if (/^\s*<(!doctype|html)/i.test(text)) return `an HTML page, not a JSON error (${oneLine(text)})`;
  return oneLine(text);
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 300);
}

/**
 * What a context-length rejection says, when it says it: vLLM "This model's maximum context length is M
 * tokens and your request has P input tokens" (max_tokens too large) or "... M tokens. However, your
 * request has P input tokens" (vllm/entrypoints/openai/engine/serving.py, _validate_input; wording varies
 * by version), SGLang "The input (P tokens) is longer than the model's context length (M tokens)" and
 * "Requested token count exceeds the model's maximum context length of M tokens"
 * (tokenizer_manager._validate_one_request), NeMo RL "Prompt length (P) fills or exceeds max_model_len (M)"
 * (vllm_worker_async.py _clamp_max_tokens).
 */
export function contextLimit(message: string): { maxModelLen?: number; promptTokens?: number } | null {
  const m = message.toLowerCase();
  const isContext =
    /context length|context window|max_model_len|prompt is too long|longer than the model|requested token count exceeds/.test(
      m,
    );
  if (!isContext) return null;
  const out: { maxModelLen?: number; promptTokens?: number } = {};
  const limit =
    /maximum context length (?:is|of) (\d+)/.exec(m) ??
    /context length \((\d+) tokens\)/.exec(m) ??
    /max_model_len \((\d+)\)/.exec(m);
  if (limit) out.maxModelLen = Number(limit[1]);
  const prompt =
    /request has (\d+) input tokens/.exec(m) ??
    /\((\d+) in the messages/.exec(m) ??
    /prompt contains at least (\d+) input tokens/.exec(m) ??
    /the input \((\d+) tokens\)/.exec(m) ??
    /prompt length \((\d+)\)/.exec(m) ??
    /(\d+) tokens from the input/.exec(m);
  if (prompt) out.promptTokens = Number(prompt[1]);
  return out;
}

/**
 * An upstream HTTP error. Client errors (a bad request, a prompt over the context) are the harness's
 * own 400, not a retryable 502; a context-length rejection becomes `context_length_exceeded`, which each
 * front API renders as its vendor does (Codex and Claude Code compact on it).
 */
export function upstreamFault(url: string, status: number, text: string): ProxyFault {
  const detail = errorDetail(text);
  if (status >= 400 && status < 500 && status !== 401 && status !== 403 && status !== 429) {
    if (contextLimit(detail)) {
      return fault('context_length_exceeded', `prompt is too long for the model's context: ${detail}`);
    }
    return fault('invalid_request', `backend rejected the request (${status}): ${detail}`, 400);
  }
  if (status === 401 || status === 403) {
    return fault(
      'backend_error',
      `backend ${url} answered ${status}: ${detail} (pass the server's key with --api-key or $POLAR_BACKEND_API_KEY)`,
    );
  }
  return fault('backend_error', `backend ${url} answered ${status}: ${detail}`);
}

/** The auth header polar sends with every request to a server started with an API key. */
export function authHeaders(apiKey: string | undefined): Record<string, string> {
  return apiKey ? { authorization: `Bearer ${apiKey}` } : {};
}

/** GET of a JSON document (server info routes); a fault names the URL and what came back instead. */
export async function getJson(
  url: string,
  options: { signal?: AbortSignal; timeoutMs: number; headers?: Record<string, string> },
): Promise<{ ok: true; json: unknown } | { ok: false; fault: ProxyFault; status?: number }> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  let response: Response;
  try {
    response = await fetch(url, { headers: { accept: 'application/json', ...options.headers }, signal });
  } catch (error) {
    return { ok: false, fault: transportFault(url, error, timeout.aborted, options.timeoutMs) };
  }
  const text = await response.text().catch(() => '');
  if (!response.ok)
    return { ok: false, status: response.status, fault: upstreamFault(url, response.status, text) };
  try {
    return { ok: true, json: JSON.parse(text) };
  } catch {
    return {
      ok: false,
      status: response.status,
      fault: fault('backend_error', `${url} answered ${errorDetail(text)} where JSON was expected`),
    };
  }
}

/**
 * Reads an SSE response body as events; yields nothing more once the body ends. Each read restarts the
 * deadline's idle clock; an event over the decoder's bound throws SseEventTooLarge.
 */
export async function* sseEvents(
  response: BackendResponse,
  deadline?: CallDeadline,
): AsyncGenerator<SseEvent> {
  const decoder = new SseDecoder();
  const text = new TextDecoder();
  for await (const chunk of response.body) {
    deadline?.touch();
    for (const event of decoder.push(text.decode(chunk, { stream: true }))) yield event;
  }
  for (const event of decoder.push(text.decode())) yield event;
  for (const event of decoder.flush()) yield event;
}

export function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}
