/**
 * ProxyFault -> Google's error body `{error: {code, message, status}}` (google.rpc.Status as the Gemini
 * API answers it; the @google/genai SDK throws an ApiError with `code` as its status, and Gemini CLI
 * retries 429, 499 and 5xx, never 400: packages/core/src/utils/retry.ts). Mid-stream the same object is
 * one `data:` event.
 */
import type { ProxyFault } from '../canonical.ts';

export function errorStatus(kind: ProxyFault['kind']): string {
  switch (kind) {
    case 'invalid_request':
    case 'too_large':
    case 'context_length_exceeded':
      return 'INVALID_ARGUMENT';
    case 'authentication':
      return 'UNAUTHENTICATED';
    case 'not_found':
      return 'NOT_FOUND';
    case 'backend_timeout':
      return 'DEADLINE_EXCEEDED';
    case 'backend_unreachable':
    case 'backend_error':
    case 'backend_no_token_ids':
    case 'overloaded': // 503 with retry-after: Gemini CLI retries it
      return 'UNAVAILABLE';
    case 'internal':
      return 'INTERNAL';
  }
}

export function errorBody(fault: ProxyFault) {
  return { error: { code: fault.status, message: fault.message, status: errorStatus(fault.kind) } };
}

export function renderError(fault: ProxyFault): { status: number; body: unknown } {
  return { status: fault.status, body: errorBody(fault) };
}
