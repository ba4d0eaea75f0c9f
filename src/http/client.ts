/**
 * The one HTTP client polar calls servers with (inference servers, their admin routes, the Hugging Face
 * datasets server): node:http(s) with keep-alive agents, a Deadline for the whole request (a total limit,
 * and an idle limit between two reads of the body, restarted by every chunk as it is read), redirects
 * followed on request. Transport failures reject (with the signal's reason when a limit or the caller
 * stopped it); what they mean to a caller (a ProxyFault, an InputError) is the caller's business.
 * (node:http rather than fetch: on the proxy's hot path fetch's web streams, header lists and body copies
 * cost about half of the proxy's CPU per call in a profile of `npm run bench -- proxy`, and most of its
 * garbage.)
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/**
 * The time limits of one request, for the whole request: a total limit from the request to the end of
 * the body, and an idle limit between two reads of the body once the response has started. Plain timers
 * this object holds stop it, so the limits cannot be garbage-collected while the request runs (an
 * `AbortSignal.timeout` referenced only through `AbortSignal.any` can be, and then never fires:
 * nodejs/node#48951, #52203). No AbortController: the client stops its request through `onAbort`, and a
 * controller (an EventTarget) per backend call was a measurable share of the proxy's hot path.
 */
export class Deadline {
  /** which limit ended the request, if one did */
  expired: 'total' | 'idle' | null = null;
  /** why it was stopped (the limit's TimeoutError, the caller's reason), once it was; never undefined then */
  reason: unknown = undefined;
  private total: NodeJS.Timeout | undefined;
  private idle: NodeJS.Timeout | undefined;
  private readonly onParentAbort: () => void;
  /** what stops the requests in flight under this deadline when it aborts (see onAbort) */
  private readonly stops = new Set<(reason: unknown) => void>();

  /**
   * @param totalMs for the whole request
   * @param idleMs without a byte once the response started; 0: no idle limit
   * @param parent the caller's signal (the harness leaving): stops the request too
   * @param unref the limits alone do not keep the process alive (a request nobody reads to the end)
   */
  constructor(
    readonly totalMs: number,
    readonly idleMs = 0,
    private readonly parent?: AbortSignal,
    private readonly unref = false,
  ) {
    this.onParentAbort = () => this.abort(parent?.reason);
    if (parent?.aborted) this.onParentAbort();
    else parent?.addEventListener('abort', this.onParentAbort, { once: true });
    this.total = setTimeout(() => this.expire('total'), totalMs);
    if (unref) this.total.unref();
  }

  /** the response started, or a chunk of its body arrived: the idle clock starts over */
  touch(): void {
    if (this.idleMs <= 0 || this.aborted) return;
    if (this.idle) this.idle.refresh();
    else {
      this.idle = setTimeout(() => this.expire('idle'), this.idleMs);
      if (this.unref) this.idle.unref();
    }
  }

  /**
   * Calls `stop` with the reason when the deadline aborts (at once when it has), until the returned
   * function is called. A plain callback: an abort listener on the signal costs an EventTarget listener
   * (and node:http's own `signal` option one more, with a stream watcher) on every request.
   */
  onAbort(stop: (reason: unknown) => void): () => void {
    if (this.aborted) {
      stop(this.reason);
      return () => {};
    }
    this.stops.add(stop);
    return () => this.stops.delete(stop);
  }

  /** whether the request was stopped: a limit passed, or the caller's signal aborted */
  get aborted(): boolean {
    return this.reason !== undefined;
  }

  private abort(reason: unknown): void {
    if (this.aborted) return;
    // (the reason AbortController.abort() gives when it is given none)
    this.reason = reason ?? new DOMException('This operation was aborted', 'AbortError');
    for (const stop of [...this.stops]) stop(this.reason);
    this.stops.clear();
  }

  /** whether the request ended because a limit passed (not because the caller stopped it) */
  get timedOut(): boolean {
    return this.expired !== null;
  }

  /** the request is over: stop the clocks and let go of the caller's signal */
  dispose(): void {
    clearTimeout(this.total);
    clearTimeout(this.idle);
    this.parent?.removeEventListener('abort', this.onParentAbort);
  }

  private expire(which: 'total' | 'idle'): void {
    if (this.aborted) return;
    this.expired = which;
    clearTimeout(this.total);
    clearTimeout(this.idle);
    this.abort(new DOMException(`${which} timeout`, 'TimeoutError'));
  }
}

/** A response: status and headers at once, the body as it arrives (each chunk restarts the idle clock). */
export interface HttpResponse {
  ok: boolean;
  status: number;
  headers: { get(name: string): string | null };
  /** the body as it arrives; leaving the iteration early closes the connection */
  body: AsyncIterable<Uint8Array>;
  bytes(): Promise<Buffer>;
  text(): Promise<string>;
  json(): Promise<unknown>;
}

export interface RequestOptions {
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** the request body (a JSON text, usually), or its pieces to send one after the other */
  body?: string | Buffer | readonly Buffer[];
  /** the request's limits, held by the caller for as long as it reads the body (it disposes of it) */
  deadline: Deadline;
  /** the client disposes of the deadline itself, once the body is read or the request failed */
  release?: boolean;
  /** follow up to this many redirects (GET only; a credential is not sent to another origin) */
  maxRedirects?: number;
}

// an idle connection is closed after 4 s (undici's default, below the 5 s idle timeout of uvicorn and
// most servers), so a request never lands on a socket the server is closing; a request in progress is not
// affected (the agent's timeout only ends free sockets)
const agents = {
  http: new HttpAgent({ keepAlive: true, timeout: 4000 }),
  https: new HttpsAgent({ keepAlive: true, timeout: 4000 }),
};

/** The error a stopped request fails with: the deadline's reason (a limit, the caller), as fetch rejects. */
function abortReason(deadline: Deadline, error: unknown): unknown {
  return deadline.aborted ? deadline.reason : error;
}

function bodyLength(body: string | Buffer | readonly Buffer[]): number {
  if (typeof body === 'string') return Buffer.byteLength(body);
  if (Buffer.isBuffer(body)) return body.length;
  let n = 0;
  for (const piece of body as readonly Buffer[]) n += piece.length;
  return n;
}

function send(url: URL, options: RequestOptions, headers: Record<string, string>): Promise<IncomingMessage> {
  const { deadline } = options;
  const body = options.body;
  return new Promise((resolve, reject) => {
    if (deadline.aborted) return reject(deadline.reason);
    const https = url.protocol === 'https:';
    const req = (https ? httpsRequest : httpRequest)(
      url,
      {
        method: options.method ?? 'GET',
        headers: body === undefined ? headers : { ...headers, 'content-length': bodyLength(body) },
        agent: https ? agents.https : agents.http,
      },
      resolve,
    );
    // the deadline stops the request (and the body being read) as node:http's `signal` option would, until
    // the request is over (its socket may then serve another request, which this must never destroy)
    const forget = deadline.onAbort((reason) => {
      req.destroy(
        Object.assign(new Error('The operation was aborted', { cause: reason }), { name: 'AbortError' }),
      );
    });
    req.once('close', forget);
    req.on('error', (error) => reject(abortReason(deadline, error)));
    if (body === undefined || typeof body === 'string' || Buffer.isBuffer(body)) req.end(body);
    else {
      // (the pieces go out with the headers in one writev once the socket is there)
      for (const piece of body as readonly Buffer[]) req.write(piece);
      req.end();
    }
  });
}

function wrap(res: IncomingMessage, deadline: Deadline, release: boolean): HttpResponse {
  const status = res.statusCode ?? 0;
  const body: AsyncIterable<Uint8Array> = {
    async *[Symbol.asyncIterator]() {
      try {
        for await (const chunk of res) {
          deadline.touch();
          yield chunk as Buffer;
        }
      } catch (error) {
        throw abortReason(deadline, error);
      } finally {
        if (release) deadline.dispose();
      }
    },
  };
  const bytes = async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  };
  const text = async () => (await bytes()).toString('utf8');
  return {
    ok: status >= 200 && status < 300,
    status,
    headers: {
      get: (name) => {
        const value = res.headers[name.toLowerCase()];
        return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
      },
    },
    body,
    bytes,
    text,
    json: async () => JSON.parse(await text()) as unknown,
  };
}

/**
 * Sends one request and resolves with the response once its headers are in (whatever the status); the
 * deadline keeps running while the caller reads the body. Rejects on a transport failure.
 */
export async function request(url: string, options: RequestOptions): Promise<HttpResponse> {
  let target = new URL(url);
  const origin = target.origin;
  try {
    for (let redirects = 0; ; redirects++) {
      const headers = { ...options.headers };
      // (as fetch does: a credential is not sent on to another origin)
      if (target.origin !== origin) delete headers.authorization;
      const res = await send(target, options, headers);
      options.deadline.touch();
      const location = res.headers.location;
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400 && location && redirects < (options.maxRedirects ?? 0)) {
        res.resume();
        target = new URL(location, target);
        continue;
      }
      return wrap(res, options.deadline, options.release ?? false);
    }
  } catch (error) {
    if (options.release) options.deadline.dispose();
    throw error;
  }
}

/** A Deadline of `timeoutMs` for one short exchange (no idle limit; it does not hold the process). */
export function timeLimit(timeoutMs: number, signal?: AbortSignal): Deadline {
  return new Deadline(timeoutMs, 0, signal, true);
}

/** A URL without its trailing slashes (a base the client appends paths to). */
export function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}
