import type { ProxyFault } from '../canonical.ts';
import { errorType } from './stream-writer.ts';

/** OpenAI's error shape: {error: {message, type, param, code}}. */
export function renderError(fault: ProxyFault): { status: number; body: unknown } {
  return {
    status: fault.status,
    body: { error: { message: fault.message, type: errorType(fault.status), param: null, code: fault.kind } },
  };
}
