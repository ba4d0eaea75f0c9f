import { HttpError } from '../http/errors.ts';
import { issuePath } from '../util/zod.ts';
import { fault, type ProxyFault } from './canonical.ts';

/**
 * A request the proxy cannot take: an HttpError (its fault's status and message; the server kit answers
 * it like any other) that also carries the fault each wire API renders in its own error shape.
 */
export class ProtocolError extends HttpError {
  readonly fault: ProxyFault;

  constructor(faultOrMessage: ProxyFault | string) {
    const f = typeof faultOrMessage === 'string' ? fault('invalid_request', faultOrMessage) : faultOrMessage;
    super(f.status, f.message, f.status >= 500 ? 'server_error' : 'invalid_request_error');
    this.fault = f;
  }

  static override isInstance(value: unknown): value is ProtocolError {
    return HttpError.isInstance(value) && (value as { fault?: unknown }).fault !== undefined;
  }
}

/** Turns a failed zod parse of a request body into a ProtocolError naming the first bad field. */
export function invalidBody(error: {
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>;
}): ProtocolError {
  const issue = error.issues[0];
  const where = issue ? issuePath(issue.path) : '(body)';
  return new ProtocolError(`${where}: ${issue?.message ?? 'invalid request body'}`);
}
