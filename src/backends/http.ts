/** Shared HTTP plumbing for backends: one fetch wrapper that turns transport faults into ProxyFaults. */
import { fault, type ProxyFault } from '../protocols/canonical.ts';
import { SseDecoder, type SseEvent, SseEventTooLarge } from '../protocols/sse.ts';
import type { CallDeadline } from './deadline.ts';

export type FetchOutcome = { ok: true; response: Response } | { ok: false; fault: ProxyFault };

/**
 * POSTs JSON under the call's deadline (which the caller holds, and disposes of, for the whole call:
 * reading the body after this returns stays under its limits).
 */
export async function postJson(
  url: string,
  body: unknown,
  options: { deadline: CallDeadline; headers?: Record<string, string> },
): Promise<FetchOutcome> {
  const { deadline } = options;
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...options.headers,
      },
      body: JSON.stringify(body),
      signal: deadline.signal,
    });
    deadline.touch();
    if (!response.ok) {
      const text = await response.text().catch(() => '');
      return { ok: false, fault: upstreamFault(url, response.status, text) };
    }
    return { ok: true, response };
  } catch (error) {
    return { ok: false, fault: transportFault(url, error, deadline) };
  }
}

/** The fault for a failed fetch or body read: a passed limit, the harness leaving, or the network. */
export function transportFault(url: string, error: unknown, deadline?: CallDeadline): ProxyFault {
  if (deadline?.timedOut) return deadline.fault(url);
  if (error instanceof SseEventTooLarge)
    return fault('backend_error', `backend ${url} sent a stream event over ${error.limit} characters`);
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  const name = (error as Error)?.name;
  if (name === 'AbortError') return fault('backend_error', `backend call to ${url} was cancelled`, 499);
  return fault(
    'backend_unreachable',
    `backend ${url} unreachable: ${cause?.code ?? cause?.message ?? (error as Error)?.message ?? String(error)}`,
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

/**
 * Reads an SSE response body as events; yields nothing more once the body ends. Each read restarts the
 * deadline's idle clock; an event over the decoder's bound throws SseEventTooLarge.
 */
export async function* sseEvents(response: Response, deadline?: CallDeadline): AsyncGenerator<SseEvent> {
  if (!response.body) return;
  const decoder = new SseDecoder();
  const text = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    deadline?.touch();
    for (const event of decoder.push(text.decode(chunk, { stream: true }))) yield event;
  }
  for (const event of decoder.push(text.decode())) yield event;
  for (const event of decoder.flush()) yield event;
}

export function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}
