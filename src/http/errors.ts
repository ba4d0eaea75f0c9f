/** Errors a request handler throws on purpose, and the one mapping from any error to an HTTP reply. */
import { PolarError } from '../errors.ts';

/** An expected failure of one request: its status, message and error type for the `{error}` body. */
export class HttpError extends PolarError {
  constructor(
    readonly status: number,
    message: string,
    readonly type = 'invalid_request_error',
  ) {
    super(message);
  }

  /** An HttpError, a ProtocolError included (by its fields: instanceof fails across module copies). */
  static override isInstance(value: unknown): value is HttpError {
    return (
      PolarError.isInstance(value) &&
      typeof (value as { status?: unknown }).status === 'number' &&
      typeof (value as { type?: unknown }).type === 'string'
    );
  }
}

export interface ErrorReply {
  status: number;
  body: { error: { message: string; type: string } };
}

/**
 * The reply for an error thrown by a handler: an HttpError (a ProtocolError too) keeps its status; any
 * other PolarError is the caller's bad input (400); anything else is an internal error (500).
 */
export function errorReply(error: unknown, internalPrefix = 'internal error'): ErrorReply {
  const reply = (status: number, message: string, type: string): ErrorReply => ({
    status,
    body: { error: { message, type } },
  });
  if (HttpError.isInstance(error)) return reply(error.status, error.message, error.type);
  if (PolarError.isInstance(error)) return reply(400, error.message, 'invalid_request_error');
  return reply(500, `${internalPrefix}: ${(error as Error)?.message ?? error}`, 'server_error');
}
