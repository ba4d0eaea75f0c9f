import { fault, type ProxyFault } from './canonical.ts';

/** A request the proxy cannot take: carries the fault each wire API renders in its own error shape. */
export class ProtocolError extends Error {
  readonly fault: ProxyFault;

  constructor(faultOrMessage: ProxyFault | string) {
    const f = typeof faultOrMessage === 'string' ? fault('invalid_request', faultOrMessage) : faultOrMessage;
    super(f.message);
    this.name = 'ProtocolError';
    this.fault = f;
  }

  static isInstance(value: unknown): value is ProtocolError {
    return (
      value instanceof Error &&
      (value as { fault?: unknown }).fault !== undefined &&
      value.name === 'ProtocolError'
    );
  }
}

/** Formats a zod issue path like `input[3].call_id`. */
export function issuePath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out ? `.${String(key)}` : String(key);
  }
  return out || '(body)';
}

/** Turns a failed zod parse of a request body into a ProtocolError naming the first bad field. */
export function invalidBody(error: {
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>;
}): ProtocolError {
  const issue = error.issues[0];
  const where = issue ? issuePath(issue.path) : '(body)';
  return new ProtocolError(`${where}: ${issue?.message ?? 'invalid request body'}`);
}
