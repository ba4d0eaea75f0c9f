/** ProxyFault -> Anthropic error body `{type:"error", error:{type, message}}`. */
import type { ProxyFault } from '../canonical.ts';

export function errorType(kind: ProxyFault['kind']): string {
  switch (kind) {
    case 'invalid_request':
      return 'invalid_request_error';
    case 'authentication':
      return 'authentication_error';
    case 'not_found':
      return 'not_found_error';
    case 'too_large':
      return 'request_too_large';
    case 'backend_timeout':
      return 'timeout_error';
    case 'backend_unreachable':
    case 'backend_error':
    case 'backend_no_token_ids':
    case 'internal':
      return 'api_error';
  }
}

export function errorBody(fault: ProxyFault) {
  return { type: 'error', error: { type: errorType(fault.kind), message: fault.message } };
}

export function renderError(fault: ProxyFault): { status: number; body: unknown } {
  return { status: fault.status, body: errorBody(fault) };
}
