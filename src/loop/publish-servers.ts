/**
 * Several inference servers behind one loop (`--backend-url A,B`: `--cluster` spreads the rollouts over
 * them): each publish goes to every one, in parallel, each through its own publisher (its own probe, its
 * own transfer: over NCCL one group per server, one sender each, at the next port when
 * --weight-sync-address names one). vLLM's async RL guide asks the same of several instances behind a
 * load balancer: pause, update and label each of them (docs/training/async_rl.md @006ebac). With
 * --reload-cmd (which restarts them all) a server that cannot take weights in place, or an update that
 * fails, makes the run restart instead, once per publish.
 */
import type { Backend } from '../backends/types.ts';
import { weightUpdatesOf } from '../backends/weight-updates.ts';
import { PolarError } from '../errors.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { log } from '../util/log.ts';
import type { Publisher, PublisherOptions } from './publish-types.ts';

/** A stand-in Backend for server `url` (what a publisher reads of one: its kind and URL). */
function serverAt(backend: Backend, url: string): Backend {
  return {
    kind: backend.kind,
    tokenExact: backend.tokenExact,
    url,
    generate: (request, context) => backend.generate(request, context),
    countTokens: (request, context) => backend.countTokens(request, context),
    close: async () => {},
  };
}

export function everyServer(
  backend: Backend,
  options: PublisherOptions & { servers: string[] },
  make: (server: Backend, options: PublisherOptions) => Publisher,
  restart: Publisher | null,
): Publisher {
  const each = options.servers.map((url, i) => {
    const rv = options.rendezvous;
    const rendezvous = rv?.port === undefined ? rv : { ...rv, port: rv.port + i };
    return make(serverAt(backend, url), {
      ...options,
      backendOptions: { ...options.backendOptions, url },
      ...(rendezvous ? { rendezvous } : {}),
    });
  });
  const updates = weightUpdatesOf(backend);
  let restarting = false;
  /** a failure of one server: with --reload-cmd the run restarts them all from now on */
  const fallBack = async (error: unknown) => {
    if (!restart || !PolarError.isInstance(error)) throw error;
    log.warn(`${error.message}: publishing restarts the servers with --reload-cmd`);
    restarting = true;
    await Promise.all(each.map((p) => p.close?.()));
  };
  return {
    needsOnnx: false,
    async prepare(version) {
      try {
        await Promise.all(each.map((p) => p.prepare?.(version)));
      } catch (error) {
        await fallBack(error);
      }
      if (version !== undefined) backend.policyVersion = version;
    },
    async publish(context) {
      if (!restarting) {
        updates.begin(options.pause ?? DEFAULTS.weightSyncPause.value);
        try {
          await Promise.all(each.map((p) => p.publish(context)));
          updates.end(context.version);
        } catch (error) {
          updates.end(undefined);
          await fallBack(error);
        }
      }
      if (restarting) await restart!.publish(context);
      if (context.version !== undefined) backend.policyVersion = context.version;
    },
    async close() {
      await Promise.all(each.map((p) => p.close?.()));
    },
  };
}
