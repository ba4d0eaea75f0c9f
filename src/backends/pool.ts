/**
 * Several inference servers behind one run (polar gym, eval, loop): every call of a rollout goes to one
 * server (its prefix cache holds the rollout's history), and a new rollout goes to the server with the
 * fewest rollouts running, ties in turn (round robin). NeMo Gym pins each session to one of NeMo RL's
 * policy_base_url servers the same way (responses_api_models/vllm_model/app.py, `_resolve_client`;
 * NVIDIA-NeMo/RL read 2026-08-22); see src/gym/backends.ts.
 */
import { redactUrl } from '../util/redact.ts';
import type { Backend } from './types.ts';

/** The inference servers of a run, and which one each rollout uses. */
export class BackendPool {
  private readonly active: number[];
  private next = 0;

  constructor(readonly backends: readonly Backend[]) {
    if (backends.length === 0) throw new Error('a backend pool needs at least one backend');
    this.active = backends.map(() => 0);
  }

  /** The server for a new rollout (fewest rollouts running, ties in turn) and its release. */
  acquire(): { backend: Backend; index: number; release: () => void } {
    const n = this.backends.length;
    let best = -1;
    for (let k = 0; k < n; k++) {
      const i = (this.next + k) % n;
      if (best < 0 || this.active[i]! < this.active[best]!) best = i;
    }
    this.next = (best + 1) % n;
    this.active[best]!++;
    let done = false;
    return {
      backend: this.backends[best]!,
      index: best,
      release: () => {
        if (done) return;
        done = true;
        this.active[best]!--;
      },
    };
  }

  /** rollouts running per server, in URL order */
  get load(): { url: string | null; rollouts: number }[] {
    return this.backends.map((b, i) => ({ url: b.url && redactUrl(b.url), rollouts: this.active[i]! }));
  }

  async close(): Promise<void> {
    await Promise.all(this.backends.map((b) => b.close()));
  }
}
