/**
 * The time limits of one backend call, for the whole call: a total limit from the request to the end of
 * the body, and an idle limit between two reads of the body once the response has started (a trickling
 * or stalled stream). One AbortController per call, aborted by plain timers this object holds, so the
 * limits cannot be garbage-collected while the call runs (an `AbortSignal.timeout` referenced only
 * through `AbortSignal.any` can be, and then never fires: nodejs/node#48951, #52203).
 */

import { DEFAULTS } from '../options/defaults.ts';
import { fault, type ProxyFault } from '../protocols/canonical.ts';

/** The limits of a call, named as in BackendOptions (a backend passes its options as they are). */
export interface DeadlineOptions {
  /** ms for the whole call; default DEFAULTS.backendTimeoutMs */
  timeoutMs?: number;
  /** ms without a byte once the response started; 0: no idle limit; default DEFAULTS.backendIdleTimeoutMs */
  idleTimeoutMs?: number;
}

export class CallDeadline {
  readonly signal: AbortSignal;
  readonly totalMs: number;
  readonly idleMs: number;
  /** which limit ended the call, if one did */
  expired: 'total' | 'idle' | null = null;
  private readonly controller = new AbortController();
  private total: NodeJS.Timeout | undefined;
  private idle: NodeJS.Timeout | undefined;
  private readonly onParentAbort: () => void;

  constructor(
    private readonly parent: AbortSignal,
    options: DeadlineOptions = {},
  ) {
    this.totalMs = options.timeoutMs ?? DEFAULTS.backendTimeoutMs.value;
    this.idleMs = options.idleTimeoutMs ?? DEFAULTS.backendIdleTimeoutMs.value;
    this.signal = this.controller.signal;
    this.onParentAbort = () => this.controller.abort(parent.reason);
    if (parent.aborted) this.onParentAbort();
    else parent.addEventListener('abort', this.onParentAbort, { once: true });
    this.total = setTimeout(() => this.expire('total'), this.totalMs);
  }

  /** the response started, or a chunk of its body arrived: the idle clock starts over */
  touch(): void {
    if (this.idleMs <= 0 || this.signal.aborted) return;
    if (this.idle) this.idle.refresh();
    else this.idle = setTimeout(() => this.expire('idle'), this.idleMs);
  }

  /** whether the call ended because a limit passed (not because the harness left) */
  get timedOut(): boolean {
    return this.expired !== null;
  }

  /** the fault for a call a limit ended */
  fault(url: string): ProxyFault {
    return this.expired === 'idle'
      ? fault('backend_timeout', `backend ${url} sent nothing for ${this.idleMs} ms (--backend-idle-timeout)`)
      : fault(
          'backend_timeout',
          `backend ${url} did not finish within ${this.totalMs} ms (--backend-timeout)`,
        );
  }

  /** the call is over: stop the clocks and let go of the harness's signal */
  dispose(): void {
    clearTimeout(this.total);
    clearTimeout(this.idle);
    this.parent.removeEventListener('abort', this.onParentAbort);
  }

  private expire(which: 'total' | 'idle'): void {
    if (this.signal.aborted) return;
    this.expired = which;
    clearTimeout(this.total);
    clearTimeout(this.idle);
    this.controller.abort(new DOMException(`backend ${which} timeout`, 'TimeoutError'));
  }
}
