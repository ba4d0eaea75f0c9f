/**
 * How a cluster node starts this polar (the same checkout at the same path: a shared file system or an
 * image), and what it gets from the driver's environment: the rollout executors (src/rollout/executors/)
 * and polar train across nodes (./train.ts) start their node processes this way.
 */
import { fileURLToPath } from 'node:url';

/** bin/polar of this checkout: a node starts the same polar at the same path (shared file system or image). */
export const POLAR_BIN = fileURLToPath(new URL('../../../bin/polar', import.meta.url));

/** How a node starts polar: --cluster-polar 'CMD ARGS' (split on spaces), else this node binary and bin/polar. */
export function polarCommand(given: string | undefined): string[] {
  return given ? given.split(/\s+/).filter(Boolean) : [process.execPath, POLAR_BIN];
}

/** The environment a node's polar gets from the driver: the backend key, when given that way. */
export function nodeEnv(): Record<string, string> {
  const key = process.env.POLAR_BACKEND_API_KEY;
  return key ? { POLAR_BACKEND_API_KEY: key } : {};
}
