/**
 * ProxyFault -> OpenAI's error body `{error:{message,type,param,code}}`: the one mapper for both OpenAI
 * wire APIs (Responses and Chat Completions), whole responses and mid-stream errors alike.
 */
import type { ProxyFault } from './canonical.ts';

export function errorType(kind: ProxyFault['kind']): string {
  switch (kind) {
    case 'invalid_request':
    case 'too_large':
    case 'context_length_exceeded':
      return 'invalid_request_error';
    case 'authentication':
      return 'authentication_error';
    case 'not_found':
      return 'not_found_error';
    case 'backend_timeout':
      return 'timeout_error';
    case 'backend_unreachable':
    case 'backend_error':
    case 'backend_no_token_ids':
    case 'overloaded':
    case 'internal':
      return 'server_error';
  }
}

export function errorBody(fault: ProxyFault) {
  // code `context_length_exceeded` is the kind's own name: OpenAI's code, which Codex compacts on
  const param = fault.kind === 'context_length_exceeded' ? 'messages' : null;
  return { error: { message: fault.message, type: errorType(fault.kind), param, code: fault.kind } };
}

export function renderError(fault: ProxyFault): { status: number; body: unknown } {
  return { status: fault.status, body: errorBody(fault) };
}
