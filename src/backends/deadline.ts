/**
 * The time limits of one backend call (the HTTP client's Deadline, src/http/client.ts): a total limit from
 * the request to the end of the body, and an idle limit between two reads of the body once the response
 * has started (a trickling or stalled stream), with polar's defaults and the fault each limit means.
 */

import { Deadline } from '../http/client.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { fault, type ProxyFault } from '../protocols/canonical.ts';

/** The limits of a call, named as in BackendOptions (a backend passes its options as they are). */
export interface DeadlineOptions {
  /** ms for the whole call; default DEFAULTS.backendTimeoutMs */
  timeoutMs?: number;
  /** ms without a byte once the response started; 0: no idle limit; default DEFAULTS.backendIdleTimeoutMs */
  idleTimeoutMs?: number;
}

export class CallDeadline extends Deadline {
  /** what the limits stay on for after the call's answer is complete (see outlive) */
  private after: Promise<unknown> | undefined;

  constructor(parent: AbortSignal, options: DeadlineOptions = {}) {
    super(
      options.timeoutMs ?? DEFAULTS.backendTimeoutMs.value,
      options.idleTimeoutMs ?? DEFAULTS.backendIdleTimeoutMs.value,
      parent,
    );
  }

  /**
   * Keeps the limits running for `work` (the rest of a response body, read after the answer was
   * complete): dispose() then lets go only once it has settled, so a backend that never ends its
   * response is still cut by the idle or total limit.
   */
  outlive(work: Promise<unknown>): void {
    this.after = work;
  }

  override dispose(): void {
    const after = this.after;
    this.after = undefined;
    if (after === undefined) super.dispose();
    else void after.finally(() => super.dispose());
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
}
