/** The body of `polar serve`: flags in, start the server, print where it listens, run until SIGTERM/SIGINT. */

import { untilSignal } from '../http/server.ts';
import { type BackendFlags, backendOptions } from '../options/backend.ts';
import { log } from '../util/log.ts';
import { startServe } from './serve.ts';

/** `polar serve` flags after parsing (commands/serve.ts). */
export interface ServeFlags extends BackendFlags {
  host: string;
  port: number;
  captures: string;
  maxInflight: number;
  adminToken?: string;
  quiet?: boolean;
}

export async function serveCommand(f: ServeFlags): Promise<number> {
  log.configure({ quiet: Boolean(f.quiet) });
  const backend = backendOptions(f);
  const { host, port, maxInflight } = f;
  const adminToken = f.adminToken ?? process.env.POLAR_ADMIN_TOKEN;
  if (!adminToken && !['127.0.0.1', 'localhost', '::1'].includes(host)) {
    log.warn(
      `the admin API on ${host} is open to anyone who can reach it: set --admin-token or POLAR_ADMIN_TOKEN`,
    );
  }
  const served = await startServe({
    backend,
    host,
    port,
    captures: f.captures,
    maxInflight,
    ...(adminToken ? { adminToken } : {}),
  });
  // one machine-readable line on stdout for scripts; the human line on stderr
  process.stdout.write(`${JSON.stringify({ url: served.url, captures: f.captures })}\n`);
  log.info(
    `serving ${backend.kind} (${backend.model}) on ${served.url}; POST ${served.url}/sessions to start a rollout`,
  );
  await untilSignal((signal) => {
    log.info(`${signal}: finishing calls in flight, then exiting`);
    return served.close();
  });
  return 0;
}
