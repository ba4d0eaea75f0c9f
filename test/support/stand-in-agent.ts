/**
 * A harness agent for the eval tests that play the harness themselves: `standInAgent(runCapture)` is pi on
 * the host (src/rollout/agents.ts HarnessAgent) whose run is the given stand-in for src/capture/run.ts
 * and whose backend is `stubBackend`, an embedded model that is never asked (the stand-in makes no calls).
 */
import type { Backend } from '../../src/backends/types.ts';
import { HarnessAgent, type RunCapture } from '../../src/rollout/agents.ts';

/** An embedded backend that generates nothing and counts no tokens. */
export const stubBackend: Backend = {
  kind: 'embedded',
  tokenExact: true,
  url: null,
  generate: async function* () {},
  countTokens: async () => ({ tokens: 0, exact: false }),
  close: async () => {},
};

export function standInAgent(runCapture: RunCapture): HarnessAgent {
  return new HarnessAgent({
    harness: 'pi',
    backend: { kind: 'embedded', model: 'm' },
    model: 'm',
    placement: 'host',
    runCapture,
    // the backend is created once per run and handed to runCapture; the stand-in never calls it
    createBackend: async () => stubBackend,
  });
}
