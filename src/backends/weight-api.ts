/**
 * What a running inference server offers for loading new weights in place, read over HTTP before a loop
 * spends any rollout on it (as src/backends/probe.ts checks the rest of its set-up), and the admin calls
 * the publishers make (src/loop/publish-vllm.ts, publish-sglang.ts). The routes, the flags they need and
 * the versions that have them, with the sources read: docs/loop.md "Publishing", ../shared/reference/
 * weight-sync.md.
 *
 * vLLM: `GET /openapi.json` lists the routes (FastAPI's, unless --disable-fastapi-docs); without it the
 * dev-mode router is told by `GET /get_world_size` (vllm entrypoints/serve/dev/rlhf/api_router.py @0100a212)
 * and the four-phase API by `GET /weight_info`. `GET /server_info?config_format=json` (dev mode:
 * vllm/entrypoints/serve/instrumentator/server_info.py @09cb327) states `vllm_config.weight_transfer_config`
 * (`--weight-transfer-config`; null without it). `GET /version` `{"version"}`.
 * SGLang: `GET /openapi.json` likewise; `GET /get_server_info` (`/server_info` on newer versions) has its
 * `version`.
 */
import { PolarError } from '../errors.ts';
import { request, timeLimit } from '../http/client.ts';
import { authHeaders, errorDetail, getJson } from './http.ts';

const PROBE_MS = 20_000;

export interface AdminAnswer {
  status: number;
  ok: boolean;
  text: string;
  /** the JSON body, or null */
  json: unknown;
}

/**
 * One admin call to a server (a weight route): its answer whatever the status; a PolarError naming the
 * URL when no answer came (the server down, the time limit).
 */
export async function adminCall(
  root: string,
  method: 'GET' | 'POST',
  path: string,
  body: unknown,
  options: { apiKey?: string | undefined; timeoutMs: number },
): Promise<AdminAnswer> {
  const url = `${root}${path}`;
  try {
    const r = await request(url, {
      method,
      headers: {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...authHeaders(options.apiKey),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      deadline: timeLimit(options.timeoutMs),
      release: true,
    });
    const text = await r.text();
    let json: unknown = null;
    try {
      json = JSON.parse(text);
    } catch {}
    return { status: r.status, ok: r.ok, text, json };
  } catch (error) {
    throw new PolarError(`${method} ${url} failed: ${(error as Error).message}`, {
      hint: 'check that the server runs and answers at --backend-url',
    });
  }
}

/** An answer's message for an error (vLLM's `{"error": {"message"}}`, FastAPI's `{"detail"}`, SGLang's). */
export function answerDetail(a: AdminAnswer): string {
  return `${a.status}: ${errorDetail(a.text).slice(0, 400)}`;
}

async function get(root: string, path: string, apiKey: string | undefined): Promise<unknown> {
  const got = await getJson(`${root}${path}`, { timeoutMs: PROBE_MS, headers: authHeaders(apiKey) });
  return got.ok ? got.json : null;
}

/**
 * The route paths of /openapi.json, with the query parameters of each POST (and `<body>` when it takes a
 * JSON body); null without the document.
 */
async function openapi(root: string, apiKey: string | undefined): Promise<Map<string, string[]> | null> {
  const doc = (await get(root, '/openapi.json', apiKey)) as {
    paths?: Record<string, { post?: { parameters?: Array<{ name?: unknown }>; requestBody?: unknown } }>;
  } | null;
  if (!doc?.paths || typeof doc.paths !== 'object') return null;
  const out = new Map<string, string[]>();
  for (const [path, ops] of Object.entries(doc.paths)) {
    const params = (ops?.post?.parameters ?? []).map((p) => String(p?.name));
    out.set(path, ops?.post?.requestBody ? [...params, '<body>'] : params);
  }
  return out;
}

/** vLLM's weight-transfer API as the server states it. */
export interface VllmWeightApi {
  /** GET /version; null when it did not say */
  version: string | null;
  /**
   * the weight-transfer routes exist: the dev-mode router (VLLM_SERVER_DEV_MODE=1) of a vLLM that has
   * them (/init_weight_transfer_engine, /update_weights; DOCS v0.16.0 on)
   */
  transferRoutes: boolean;
  /** --weight-transfer-config's backend (nccl, ipc, disk, ...); null when started without it or unknown */
  backend: string | null;
  /** whether the backend could be read (/server_info answered) */
  backendKnown: boolean;
  /** /start_weight_update and /finish_weight_update (the four-phase protocol) */
  fourPhase: boolean;
  /** /update_weight_version and /weight_info */
  versionRoutes: boolean;
  /** /pause takes `mode` (abort|wait|keep); older servers take wait_for_inflight_requests only */
  pauseModes: boolean;
  /** GET /get_world_size: TP * PP * DP */
  worldSize: number | null;
}

export async function probeVllmWeights(root: string, apiKey: string | undefined): Promise<VllmWeightApi> {
  const [versionDoc, routes, worldDoc, info] = await Promise.all([
    get(root, '/version', apiKey),
    openapi(root, apiKey),
    get(root, '/get_world_size', apiKey),
    get(root, '/server_info?config_format=json', apiKey),
  ]);
  const version = (versionDoc as { version?: unknown } | null)?.version;
  const world = (worldDoc as { world_size?: unknown } | null)?.world_size;
  const weightInfo = routes ? null : await get(root, '/weight_info', apiKey);
  const has = (path: string) => (routes ? routes.has(path) : null);
  const config = (info as { vllm_config?: unknown } | null)?.vllm_config;
  let backend: string | null = null;
  if (config && typeof config === 'object') {
    const wt = (config as { weight_transfer_config?: { backend?: unknown } | null }).weight_transfer_config;
    backend = typeof wt?.backend === 'string' ? wt.backend : null;
  } else if (typeof config === 'string') {
    backend = /weight_transfer_config=WeightTransferConfig\(backend='([a-z_]+)'/.exec(config)?.[1] ?? null;
  }
  const transferRoutes = has('/init_weight_transfer_engine') ?? typeof world === 'number';
  const pauseParams = routes?.get('/pause');
  return {
    version: typeof version === 'string' ? version : null,
    transferRoutes,
    backend,
    backendKnown: info !== null,
    fourPhase: has('/start_weight_update') ?? weightInfo !== null,
    versionRoutes: has('/update_weight_version') ?? weightInfo !== null,
    pauseModes: pauseParams ? pauseParams.includes('mode') : true,
    worldSize: typeof world === 'number' && world > 0 ? world : null,
  };
}

/** SGLang's weight routes as the server states them (null: unknown, /openapi.json did not answer). */
export interface SglangWeightApi {
  version: string | null;
  /** the GPUs of one server (tp_size x pp_size of /get_server_info); null when it did not say */
  gpus: number | null;
  distributed: boolean | null;
  versionRoute: boolean | null;
  /** /pause_generation takes a body (`{"mode"}`: abort, retract, in_place); older ones take none */
  pauseModes: boolean | null;
}

export async function probeSglangWeights(root: string, apiKey: string | undefined): Promise<SglangWeightApi> {
  const [routes, info] = await Promise.all([openapi(root, apiKey), get(root, '/get_server_info', apiKey)]);
  const args = info as { version?: unknown; tp_size?: unknown; pp_size?: unknown } | null;
  const version = args?.version;
  const has = (path: string) => (routes ? routes.has(path) : null);
  const tp = typeof args?.tp_size === 'number' ? args.tp_size : null;
  const pp = typeof args?.pp_size === 'number' ? args.pp_size : 1;
  return {
    version: typeof version === 'string' ? version : null,
    gpus: tp === null ? null : tp * pp,
    distributed: has('/update_weights_from_distributed'),
    versionRoute: has('/update_weight_version'),
    pauseModes: routes ? (routes.get('/pause_generation')?.includes('<body>') ?? false) : null,
  };
}
