/**
 * Shared HTTP plumbing for backends: one JSON POST over node:http with keep-alive connections, that turns
 * transport faults into ProxyFaults. (node:http rather than fetch: on the proxy's hot path fetch's web
 * streams, header lists and body copies cost about half of the proxy's CPU per call in a profile of
 * `npm run bench -- proxy`, and most of its garbage.)
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { fault, type ProxyFault } from '../protocols/canonical.ts';
import { SseDecoder, type SseEvent } from '../protocols/sse.ts';

/** The part of a fetch Response the backends use. */
export interface BackendResponse {
  ok: boolean;
  status: number;
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
    body,
    text,
    json: async () => JSON.parse(await text()) as unknown,
  };
}

export async function postJson(
  url: string,
  body: unknown,
  options: { signal: AbortSignal; timeoutMs: number; headers?: Record<string, string> },
): Promise<FetchOutcome> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = AbortSignal.any([options.signal, timeout]);
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
    const response = wrap(res, signal);
    if (!response.ok) {
      const text = await response.text().catch(() => '');
      return { ok: false, fault: upstreamFault(url, response.status, text) };
    }
    return { ok: true, response };
  } catch (error) {
    return { ok: false, fault: transportFault(url, error, timeout.aborted, options.timeoutMs) };
  }
}

export function transportFault(
  url: string,
  error: unknown,
  timedOut: boolean,
  timeoutMs: number,
): ProxyFault {
  if (timedOut) return fault('backend_timeout', `backend ${url} did not answer within ${timeoutMs} ms`);
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  const name = (error as Error)?.name;
  if (name === 'AbortError') return fault('backend_error', `backend call to ${url} was cancelled`, 499);
  return fault(
    'backend_unreachable',
    `backend ${url} unreachable: ${cause?.code ?? (error as { code?: string })?.code ?? cause?.message ?? (error as Error)?.message ?? String(error)}`,
  );
}

/** An upstream HTTP error: client errors (bad request, context too long) pass through as 400. */
export function upstreamFault(url: string, status: number, text: string): ProxyFault {
  let detail = text.slice(0, 500);
  try {
    const parsed = JSON.parse(text) as { error?: { message?: string } | string; message?: string };
    detail =
      (typeof parsed.error === 'string' ? parsed.error : parsed.error?.message) ?? parsed.message ?? detail;
  } catch {}
  if (status >= 400 && status < 500 && status !== 401 && status !== 403 && status !== 429) {
    return fault('invalid_request', `backend rejected the request (${status}): ${detail}`, 400);
  }
  return fault('backend_error', `backend ${url} answered ${status}: ${detail}`);
}

/** Reads an SSE response body as events; yields nothing more once the body ends. */
export async function* sseEvents(response: BackendResponse): AsyncGenerator<SseEvent> {
  const decoder = new SseDecoder();
  const text = new TextDecoder();
  for await (const chunk of response.body) {
    for (const event of decoder.push(text.decode(chunk, { stream: true }))) yield event;
  }
  for (const event of decoder.push(text.decode())) yield event;
  for (const event of decoder.flush()) yield event;
}

export function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}
