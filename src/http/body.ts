/** Reading a request body with a size limit, decoding gzip/deflate/br. */
import type { IncomingMessage } from 'node:http';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';

/** Why a body could not be read: over the limit, an encoding we do not decode, or a broken stream. */
export interface BodyError {
  kind: 'too_large' | 'unsupported_encoding' | 'unreadable';
  status: number;
  message: string;
}

/** Reads a request body up to a limit. Resolves an error value instead of throwing. */
export async function readBody(
  req: IncomingMessage,
  maxBytes: number,
): Promise<{ text: string; bytes: Buffer } | { error: BodyError }> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > maxBytes) {
    req.resume();
    return tooLarge(`request body of ${declared} bytes is over the limit of ${maxBytes} bytes`);
  }
  const encoding = String(req.headers['content-encoding'] ?? 'identity').toLowerCase();
  let source: NodeJS.ReadableStream = req;
  if (encoding === 'gzip') source = req.pipe(createGunzip());
  else if (encoding === 'deflate') source = req.pipe(createInflate());
  else if (encoding === 'br') source = req.pipe(createBrotliDecompress());
  else if (encoding !== 'identity') {
    req.resume();
    const message = `content-encoding ${encoding} is not supported`;
    return { error: { kind: 'unsupported_encoding', status: 415, message } };
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) {
        req.resume();
        return tooLarge(`request body is over the limit of ${maxBytes} bytes`);
      }
      chunks.push(chunk);
    }
  } catch (error) {
    const message = `could not read the request body: ${(error as Error).message}`;
    return { error: { kind: 'unreadable', status: 400, message } };
  }
  const bytes = Buffer.concat(chunks);
  return { text: bytes.toString('utf8'), bytes };
}

function tooLarge(message: string): { error: BodyError } {
  return { error: { kind: 'too_large', status: 413, message } };
}
