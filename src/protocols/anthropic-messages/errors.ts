/** ProxyFault -> Anthropic error body `{type:"error", error:{type, message}}`. */
import type { ProxyFault } from '../canonical.ts';

export function errorType(kind: ProxyFault['kind']): string {
  switch (kind) {
    case 'invalid_request':
    case 'context_length_exceeded':
      return 'invalid_request_error';
    case 'authentication':
      return 'authentication_error';
    case 'not_found':
      return 'not_found_error';
    case 'too_large':
      return 'request_too_large';
    case 'backend_timeout':
      return 'timeout_error';
    case 'overloaded':
      return 'overloaded_error';
    case 'backend_unreachable':
    case 'backend_error':
    case 'backend_no_token_ids':
    case 'internal':
      return 'api_error';
  }
}

export function errorBody(fault: ProxyFault) {
  // Claude Code compacts on an invalid_request_error whose message starts "prompt is too long"
  const message =
    fault.kind === 'context_length_exceeded' && !/^prompt is too long/i.test(fault.message)
      ? `prompt is too long: ${fault.message}`
      : fault.message;
  return { type: 'error', error: { type: errorType(fault.kind), message } };
}

export function renderError(fault: ProxyFault): { status: number; body: unknown } {
  return { status: fault.status, body: errorBody(fault) };
}
