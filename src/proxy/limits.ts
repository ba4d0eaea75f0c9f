/**
 * Backpressure: at most N backend calls in flight per backend, the rest wait in a FIFO queue. The queue
 * depth is visible (polar serve's GET /status). A waiting call whose harness disconnects leaves the queue.
 */

import type { Backend, CallContext } from '../backends/types.ts';
import type { CanonicalRequest, StreamEvent } from '../protocols/canonical.ts';

export class Semaphore {
  private active = 0;
  private readonly waiting: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  constructor(readonly max: number) {
    if (!(max >= 1)) throw new Error(`limit must be >= 1, got ${max}`);
  }

  get inflight(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.length;
  }

  async acquire(signal?: AbortSignal): Promise<() => void> {
    if (this.active < this.max) {
      this.active++;
      return this.releaser();
    }
    await new Promise<void>((resolve, reject) => {
      const entry = { resolve, reject };
      this.waiting.push(entry);
      signal?.addEventListener(
        'abort',
        () => {
          const i = this.waiting.indexOf(entry);
          if (i >= 0) {
            this.waiting.splice(i, 1);
            reject(new Error('cancelled while queued'));
          }
        },
        { once: true },
      );
    });
    this.active++;
    return this.releaser();
  }

  private releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.active--;
      this.waiting.shift()?.resolve();
    };
  }
}

export interface LimitedBackend extends Backend {
  readonly limit: Semaphore;
}

/** Wraps a backend so that at most `max` generate/countTokens calls run at once. */
export function limitBackend(backend: Backend, max: number): LimitedBackend {
  const limit = new Semaphore(max);
  return {
    kind: backend.kind,
    tokenExact: backend.tokenExact,
    url: backend.url,
    limit,
    async *generate(request: CanonicalRequest, context: CallContext): AsyncGenerator<StreamEvent> {
      let release: () => void;
      try {
        release = await limit.acquire(context.signal);
      } catch {
        yield {
          type: 'error',
          error: {
            kind: 'backend_error',
            message: 'call cancelled while queued for the backend',
            status: 499,
          },
        };
        return;
      }
      try {
        yield* backend.generate(request, context);
      } finally {
        release();
      }
    },
    async countTokens(request, context) {
      const release = await limit.acquire(context.signal);
      try {
        return await backend.countTokens(request, context);
      } finally {
        release();
      }
    },
    close: () => backend.close(),
  };
}
