/** The body of `polar serve`: flags in, start the server, print where it listens, run until SIGTERM/SIGINT. */

import { serverExitCode, untilSignal } from '../http/server.ts';
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
  maxSessions: number;
  /** milliseconds */
  sessionIdleTimeout: number;
  quiet?: boolean;
}

export async function serveCommand(f: ServeFlags): Promise<number> {
  log.configure({ quiet: Boolean(f.quiet) });
  const backend = backendOptions(f);
  const { host, port, maxInflight } = f;
  // the admin API always needs a token: the one given, or one made here and printed once
  const adminToken = f.adminToken ?? process.env.POLAR_ADMIN_TOKEN;
  const served = await startServe({
    backend,
    host,
    port,
    captures: f.captures,
    maxInflight,
    maxSessions: f.maxSessions,
    sessionIdleTimeoutMs: f.sessionIdleTimeout,
    ...(adminToken ? { adminToken } : {}),
  });
  // listening for the stop signals before the line that says the server is up: a caller that stops it
  // as soon as it reads the line must not find another listener swallowing the signal
  const stopped = untilSignal((received) => {
    log.info(`${received}: finishing calls in flight, then exiting`);
    return served.close();
  });
  // one machine-readable line on stdout for scripts (with the admin token when polar made it); the
  // human line on stderr
  const line = {
    url: served.url,
    captures: f.captures,
    ...(adminToken ? {} : { admin_token: served.adminToken }),
  };
  process.stdout.write(`${JSON.stringify(line)}\n`);
  if (!adminToken)
    log.info(`admin API token: ${served.adminToken} (--admin-token or $POLAR_ADMIN_TOKEN to choose it)`);
  log.info(
    `serving ${backend.kind} (${backend.model}) on ${served.url}; POST ${served.url}/sessions to start a rollout`,
  );
  return serverExitCode(await stopped);
}
