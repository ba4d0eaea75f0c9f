/** The body of `polar serve`: flags in, start the server, print where it listens, run until SIGTERM/SIGINT. */
import { type BackendFlags, backendOptions, parseNonNegativeInt } from '../capture/options.ts';
import { UsageError } from '../errors.ts';
import { untilSignal } from '../http/server.ts';
import { log } from '../util/log.ts';
import { startServe } from './serve.ts';

export async function serveCommand(flags: Record<string, unknown>): Promise<number> {
  const f = flags as BackendFlags & {
    host?: string;
    port?: string;
    captures?: string;
    maxInflight?: string;
    adminToken?: string;
    quiet?: boolean;
  };
  log.configure({ quiet: Boolean(f.quiet) });
  const backend = backendOptions(f);
  const port = parseNonNegativeInt('--port', f.port) ?? 8100;
  const maxInflight = parseNonNegativeInt('--max-inflight', f.maxInflight) ?? 64;
  if (maxInflight < 1) throw new UsageError('--max-inflight must be at least 1');
  const adminToken = f.adminToken ?? process.env.POLAR_ADMIN_TOKEN;
  const host = f.host ?? '127.0.0.1';
  if (!adminToken && !['127.0.0.1', 'localhost', '::1'].includes(host)) {
    log.warn(
      `the admin API on ${host} is open to anyone who can reach it: set --admin-token or POLAR_ADMIN_TOKEN`,
    );
  }
  const served = await startServe({
    backend,
    host,
    port,
    captures: f.captures ?? 'polar-captures',
    maxInflight,
    ...(adminToken ? { adminToken } : {}),
  });
  // one machine-readable line on stdout for scripts; the human line on stderr
  process.stdout.write(`${JSON.stringify({ url: served.url, captures: f.captures ?? 'polar-captures' })}\n`);
  log.info(
    `serving ${backend.kind} (${backend.model}) on ${served.url}; POST ${served.url}/sessions to start a rollout`,
  );
  await untilSignal((signal) => {
    log.info(`${signal}: finishing calls in flight, then exiting`);
    return served.close();
  });
  return 0;
}
