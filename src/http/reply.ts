/** JSON in and out: the one way polar's servers answer and read JSON bodies. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { depthProblem } from '../util/json-depth.ts';
import { readBody } from './body.ts';
import { HttpError } from './errors.ts';

/** Sends a JSON body (with content-length); a response already started is only ended. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) {
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/**
 * Reads a JSON body up to maxBytes. An empty body is `empty` (undefined unless given); throws HttpError
 * for a body over the limit (413), unreadable, nested too deep for anything to walk it, or not JSON
 * (400). The depth is checked on the bytes, before the body is parsed or any work starts on it.
 */
export async function readJson(
  req: IncomingMessage,
  maxBytes: number,
  options: { empty?: unknown } = {},
): Promise<unknown> {
  const read = await readBody(req, maxBytes);
  if ('error' in read) throw new HttpError(read.error.status, read.error.message);
  if ('empty' in options && !read.text.trim()) return options.empty;
  const deep = depthProblem(read.bytes);
  if (deep) throw new HttpError(400, deep);
  try {
    return JSON.parse(read.text) as unknown;
  } catch {
    throw new HttpError(400, 'body is not valid JSON');
  }
}
