import type { IncomingMessage } from 'node:http';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { fault, type ProxyFault } from '../protocols/canonical.ts';

export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;

/** Reads a request body up to a limit, decoding gzip/deflate/br. Resolves a fault instead of throwing. */
export async function readBody(
  req: IncomingMessage,
  maxBytes: number,
): Promise<{ text: string; bytes: Buffer } | { fault: ProxyFault }> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > maxBytes) {
    req.resume();
    return {
      fault: fault('too_large', `request body of ${declared} bytes is over the limit of ${maxBytes} bytes`),
    };
  }
  const encoding = String(req.headers['content-encoding'] ?? 'identity').toLowerCase();
  let source: NodeJS.ReadableStream = req;
  if (encoding === 'gzip') source = req.pipe(createGunzip());
  else if (encoding === 'deflate') source = req.pipe(createInflate());
  else if (encoding === 'br') source = req.pipe(createBrotliDecompress());
  else if (encoding !== 'identity') {
    req.resume();
    return { fault: fault('invalid_request', `content-encoding ${encoding} is not supported`, 415) };
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) {
        req.resume();
        return { fault: fault('too_large', `request body is over the limit of ${maxBytes} bytes`) };
      }
      chunks.push(chunk);
    }
  } catch (error) {
    return {
      fault: fault('invalid_request', `could not read the request body: ${(error as Error).message}`),
    };
  }
  const bytes = Buffer.concat(chunks);
  return { text: bytes.toString('utf8'), bytes };
}
