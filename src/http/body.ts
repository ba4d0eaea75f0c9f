/**
 * Reading a request body with a size limit, decoding gzip/deflate/br; and a server's budget for the
 * bodies it holds at once, over all its requests (each body's own limit does not bound their sum).
 */
import type { IncomingMessage } from 'node:http';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';

/**
 * Why a body could not be read: over the limit, over the server's budget (`busy`: retry later), an
 * encoding we do not decode, or a broken stream.
 */
export interface BodyError {
  kind: 'too_large' | 'busy' | 'unsupported_encoding' | 'unreadable';
  status: number;
  message: string;
}

/** A request's share of a BodyBudget: what its body holds; released when the body is let go. */
export interface BodyClaim {
  /** adds n bytes to the claim when the budget has room; false (nothing added) when it has not */
  take(n: number): boolean;
  release(): void;
}

/**
 * The bytes of request bodies a server holds at once, over all its requests (polar gym bounds its body
 * reads the same way, by count). A body that does not fit is refused with 503 and `retry-after`
 * (RETRY_AFTER_S) instead of taking the process's memory with it.
 */
export class BodyBudget {
  private held = 0;

  constructor(readonly maxBytes: number) {}

  /** bytes held now */
  get bytes(): number {
    return this.held;
  }

  claim(): BodyClaim {
    let mine = 0;
    return {
      take: (n) => {
        if (this.held + n > this.maxBytes) return false;
        this.held += n;
        mine += n;
        return true;
      },
      release: () => {
        this.held -= mine;
        mine = 0;
      },
    };
  }
}

/** what a refused body's `retry-after` says */
export const RETRY_AFTER_S = 1;

/**
 * Reads a request body up to a limit; with a claim, the bytes count against the server's BodyBudget
 * (the declared length up front, then what arrives beyond it). Resolves an error value instead of
 * throwing.
 */
export async function readBody(
  req: IncomingMessage,
  maxBytes: number,
  claim?: BodyClaim,
): Promise<ReadBody | { error: BodyError }> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > maxBytes) {
    req.resume();
    return tooLarge(`request body of ${declared} bytes is over the limit of ${maxBytes} bytes`);
  }
  let claimed = 0;
  if (claim && declared > 0) {
    if (!claim.take(declared)) {
      req.resume();
      return busy();
    }
    claimed = declared;
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
  // (the body's 'data' events, not its async iterator: leaving that one early destroys the stream, and
  // with it the connection, so a body refused while it was read never got its 413 or 503)
  const chunks: Buffer[] = [];
  const outcome = await new Promise<BodyError | null>((resolve) => {
    let size = 0;
    const done = (error: BodyError | null) => {
      source.removeListener('data', onData);
      source.removeListener('end', onEnd);
      source.removeListener('error', onError);
      source.removeListener('close', onClose);
      // (a decompressor's late error, once nobody listens, must not end the process; the request
      // itself emits errors only to listeners)
      if (source !== req) source.on('error', () => {});
      resolve(error);
    };
    const refuse = (error: BodyError) => {
      done(error);
      // the rest is read and dropped (the connection stays usable for the answer)
      if (source !== req) (source as unknown as { destroy(): void }).destroy();
      req.resume();
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes)
        return refuse(tooLarge(`request body is over the limit of ${maxBytes} bytes`).error);
      if (claim && size > claimed) {
        if (!claim.take(size - claimed)) return refuse(busy().error);
        claimed = size;
      }
      chunks.push(chunk);
    };
    const onEnd = () => done(null);
    const onError = (error: Error) =>
      done({ kind: 'unreadable', status: 400, message: `could not read the request body: ${error.message}` });
    const onClose = () => onError(new Error('the connection closed before the body ended'));
    source.on('data', onData);
    source.on('end', onEnd);
    source.on('error', onError);
    source.on('close', onClose);
  });
  if (outcome !== null) return { error: outcome };
  return new ReadBody(Buffer.concat(chunks));
}

/** A body read whole: its bytes, and its text decoded when first asked for (the proxy parses the bytes). */
export class ReadBody {
  private decoded: string | undefined;

  constructor(readonly bytes: Buffer) {}

  get text(): string {
    this.decoded ??= this.bytes.toString('utf8');
    return this.decoded;
  }
}

function tooLarge(message: string): { error: BodyError } {
  return { error: { kind: 'too_large', status: 413, message } };
}

function busy(): { error: BodyError } {
  const message = `polar holds as many request bodies as its memory budget allows: retry in ${RETRY_AFTER_S} s`;
  return { error: { kind: 'busy', status: 503, message } };
}
