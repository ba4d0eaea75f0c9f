/**
 * The backends' side of the one HTTP client (src/http/client.ts): JSON POST and GET whose failures become
 * ProxyFaults (a passed limit, the network, an upstream error status), the SSE reader of a streamed body,
 * and the readings of inference servers' error bodies.
 */
import { StringDecoder } from 'node:string_decoder';
import { type Deadline, type HttpResponse, request, timeLimit } from '../http/client.ts';
import { fault, type ProxyFault } from '../protocols/canonical.ts';
import { SseDecoder, type SseEvent, SseEventTooLarge } from '../protocols/sse.ts';
import { stringifyJsonPieces } from '../util/json-text.ts';
import { CallDeadline } from './deadline.ts';

/** A backend's response (the client's): status and headers, the body as it arrives. */
export type BackendResponse = HttpResponse;

export type FetchOutcome = { ok: true; response: BackendResponse } | { ok: false; fault: ProxyFault };

/** What a request is limited by: the call's deadline, or one plain timeout (server-info routes, probes). */
export type Limits = { deadline: CallDeadline } | { signal?: AbortSignal; timeoutMs: number };

/** The call's deadline, or one of the timeout's own that the client releases when the body is read. */
function deadlineOf(limits: Limits): { deadline: Deadline; release: boolean } {
  if ('deadline' in limits) return { deadline: limits.deadline, release: false };
  return { deadline: timeLimit(limits.timeoutMs, limits.signal), release: true };
}

/** A failed request's fault, naming the limit that passed (the call's, or a plain timeout). */
function failure(url: string, error: unknown, limits: Limits, deadline: Deadline): ProxyFault {
  return 'deadline' in limits
    ? transportFault(url, error, limits.deadline)
    : transportFault(url, error, deadline.timedOut, limits.timeoutMs);
}

/**
 * POSTs JSON. With a `deadline` (the call's, which the caller holds and disposes of for the whole call),
 * reading the body after this returns stays under its total and idle limits; with `timeoutMs`, one
 * timeout covers the request and the body read right after it (server-info routes, probes).
 */
export async function postJson(
  url: string,
  body: unknown,
  options: Limits & { headers?: Record<string, string> },
): Promise<FetchOutcome> {
  const { deadline, release } = deadlineOf(options);
  try {
    const response = await request(url, {
      method: 'POST',
      // (a conversation's long texts were escaped and encoded for the call before: remembered)
      body: stringifyJsonPieces(body),
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...options.headers,
      },
      deadline,
      release,
    });
    if (!response.ok) {
      const text = await response.text().catch(() => '');
      return { ok: false, fault: upstreamFault(url, response.status, text) };
    }
    return { ok: true, response };
  } catch (error) {
    return { ok: false, fault: failure(url, error, options, deadline) };
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
  const { deadline } = deadlineOf(options);
  let text: string;
  let status: number;
  try {
    const response = await request(url, {
      headers: { accept: 'application/json', ...options.headers },
      deadline,
    });
    status = response.status;
    text = await response.text().catch(() => '');
    if (!response.ok) return { ok: false, status, fault: upstreamFault(url, status, text) };
  } catch (error) {
    return { ok: false, fault: failure(url, error, options, deadline) };
  } finally {
    deadline.dispose();
  }
  try {
    return { ok: true, json: JSON.parse(text) };
  } catch {
    return {
      ok: false,
      status,
      fault: fault('backend_error', `${url} answered ${errorDetail(text)} where JSON was expected`),
    };
  }
}

/**
 * Reads an SSE response body as events; yields nothing more once the body ends. (Each read restarts the
 * deadline's idle clock, in the client.) An event over the decoder's bound throws SseEventTooLarge.
 */
export async function* sseEvents(response: BackendResponse): AsyncGenerator<SseEvent> {
  const decoder = new SseDecoder();
  // node's StringDecoder, not TextDecoder: the same text for valid UTF-8 (a character split between two
  // reads is held until its last byte), about a tenth of the cost per read on the proxy's hot path
  const text = new StringDecoder('utf8');
  for await (const chunk of response.body) {
    for (const event of decoder.push(text.write(chunk as Buffer))) yield event;
  }
  for (const event of decoder.push(text.end())) yield event;
  for (const event of decoder.flush()) yield event;
}
