/**
 * `polar gym`: a NeMo Gym agent server (the contract in src/gym/contract.ts). One POST /run is one
 * rollout: the task row's SWE-bench instance is checked out by the configured runtime, the configured
 * harness runs on it under polar's capture proxy (runEval -> HarnessAgent -> runCapture, the same code
 * as `polar eval`, one capture file per rollout), the patch is graded by polar's grader, and the capture
 * is turned into Responses output items whose model-call items carry prompt_token_ids,
 * generation_token_ids and generation_log_probs (src/gym/rollout.ts), plus the reward.
 * POST /v1/responses runs the harness without grading; POST /aggregate_metrics aggregates.
 * The rollouts themselves run in src/gym/rollout-runner.ts; this file is the server around them.
 */
import { resolve } from 'node:path';
import { createBackend } from '../backends/index.ts';
import { BackendPool } from '../backends/pool.ts';
import type { Backend } from '../backends/types.ts';
import { ensureBackendReady } from '../backends/wait.ts';
import { UsageError } from '../errors.ts';
import { isLoopback, newToken, presentedToken, sameToken } from '../http/auth.ts';
import { errorReply, HttpError } from '../http/errors.ts';
import { readJson } from '../http/reply.ts';
import { dispatch, pathOf, type Route } from '../http/router.ts';
import { HttpServer } from '../http/server.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { limitBackend, Semaphore } from '../proxy/limits.ts';
import { log } from '../util/log.ts';
import { mkdirPrivate } from '../util/private-files.ts';
import { aggregateMetricsRequestSchema } from './contract.ts';
import { aggregateMetrics } from './metrics.ts';
import type { GymOptions } from './options.ts';
import { GymRollouts, zodError } from './rollout-runner.ts';

export type { GymOptions } from './options.ts';

export interface Gym {
  url: string;
  /** the bearer token the routes require; null with --no-auth */
  token: string | null;
  close(): Promise<void>;
}

const RESPONSES_PATH = /^\/(?:ng-rollout\/[^/]+\/(?:training-token-capture\/)?)?v1\/responses$/;
/** routes open without the token: liveness only (NeMo Gym polls GET / for readiness) */
const OPEN_PATHS = new Set(['/', '/health']);

export async function startGym(options: GymOptions): Promise<Gym> {
  for (const [flag, value] of [
    ['--max-rollouts', options.maxRollouts],
    ['--max-inflight', options.maxInflight],
    ['maxBodyReads', options.maxBodyReads],
  ] as const) {
    if (value !== undefined && !(Number.isInteger(value) && value >= 1))
      throw new UsageError(`${flag} must be a whole number of at least 1, got ${value}`);
  }
  const pool = new BackendPool(
    (await gymBackends(options)).map((b) =>
      limitBackend(b, options.maxInflight ?? DEFAULTS.maxInflight.value),
    ),
  );
  const out = resolve(options.out);
  await mkdirPrivate(out);
  const rollouts = new GymRollouts(options, pool, out);
  const routes = gymRoutes(options, rollouts, pool);
  const token = options.token === undefined ? newToken('polar-gym') : options.token;
  const server = new HttpServer(
    async (req, res) => {
      if (token !== null && !OPEN_PATHS.has(pathOf(req.url)) && !sameToken(presentedToken(req), token)) {
        // (the body is not read: the connection closes after the answer)
        res.setHeader('connection', 'close');
        req.resume();
        throw new HttpError(401, 'polar gym: missing or wrong bearer token', 'authentication_error');
      }
      if (await dispatch(routes, req, res)) return;
      req.resume();
      throw new HttpError(404, `no route for ${req.method} ${pathOf(req.url)}`, 'not_found_error');
    },
    {
      ...options.connections,
      onError: (error, req) => {
        const reply = errorReply(error, 'polar gym');
        if (reply.status >= 500) log.warn(`gym: ${req.method} ${req.url}: ${reply.body.error.message}`);
        return reply;
      },
    },
  );
  const host = options.host ?? DEFAULTS.host.value;
  if (token === null && !isLoopback(host))
    log.warn(
      `polar gym on ${host} runs rollouts for anyone who can reach it${options.runtime.isolated ? '' : `, and the ${options.runtime.kind} runtime runs each harness unsandboxed on this machine, doing what the caller's prompt asks`}: drop --no-auth, or listen on 127.0.0.1 or a private interface (docs/gym.md, "Access and limits")`,
    );
  const { url } = await server.listen(options.port ?? DEFAULTS.gymPort.value, host);
  return {
    url,
    token,
    async close() {
      await server.close();
      if (!options.backendInstance) await pool.close();
    },
  };
}

/** The servers' URLs: --backend-url, a list when NeMo RL runs several generation servers. */
export function gymBackendUrls(options: Pick<GymOptions, 'backend' | 'backendUrls'>): string[] {
  const urls = options.backendUrls?.length
    ? options.backendUrls
    : options.backend.url
      ? [options.backend.url]
      : [];
  const seen = new Set<string>();
  for (const url of urls) {
    if (seen.has(url)) throw new UsageError(`--backend-url ${url} is listed twice`, 'list each server once');
    seen.add(url);
  }
  return urls;
}

/** One backend per server (an in-process engine: one), each checked before the gym listens. */
async function gymBackends(options: GymOptions): Promise<Backend[]> {
  if (options.backendInstance)
    return Array.isArray(options.backendInstance) ? options.backendInstance : [options.backendInstance];
  const urls = gymBackendUrls(options);
  const each = urls.length ? urls.map((url) => ({ ...options.backend, url })) : [options.backend];
  // a wrong server set-up stops here, with one message, before any rollout (src/backends/probe.ts)
  if (options.probe !== false) for (const o of each) await ensureBackendReady(o);
  return Promise.all(each.map((o) => createBackend(o)));
}

/** The gym's routes: health, the two rollout endpoints, and metric aggregation. */
function gymRoutes(options: GymOptions, rollouts: GymRollouts, pool: BackendPool): Route[] {
  const maxBody = options.maxBodyBytes ?? DEFAULTS.gymMaxBodyBytes.value;
  // a bound on bodies read at once: memory is at most this many times the body limit
  const reads = new Semaphore(options.maxBodyReads ?? DEFAULTS.gymBodyReads.value);
  const readRow = async (req: import('node:http').IncomingMessage) => {
    const release = await reads.acquire();
    try {
      return await readJson(req, maxBody);
    } finally {
      release();
    }
  };
  const health = ({ req }: { req: import('node:http').IncomingMessage }) => {
    req.resume();
    const body = {
      ok: true,
      harness: options.harness,
      runtime: options.runtime.kind,
      rollouts_in_flight: rollouts.slots.inflight,
      rollouts_queued: rollouts.slots.queued,
      body_reads_queued: reads.queued,
      backends: pool.load,
    };
    return { status: 200, body };
  };
  return [
    { method: 'GET', path: '/health', handler: health },
    { method: 'GET', path: '/', handler: health },
    {
      method: 'POST',
      path: '/run',
      handler: async ({ req }) => ({ status: 200, body: await rollouts.run(await readRow(req)) }),
    },
    {
      method: 'POST',
      path: RESPONSES_PATH,
      handler: async ({ req }) => ({
        status: 200,
        body: await rollouts.responses(await readRow(req)),
      }),
    },
    {
      method: 'POST',
      path: '/aggregate_metrics',
      handler: async ({ req }) => {
        const parsed = aggregateMetricsRequestSchema.safeParse(await readRow(req));
        if (!parsed.success) throw zodError(parsed.error);
        return { status: 200, body: aggregateMetrics(parsed.data.verify_responses) };
      },
    },
  ];
}
