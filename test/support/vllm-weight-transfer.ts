/**
 * vLLM's weight-transfer HTTP control plane and its pause/resume, for the vLLM stand-in
 * (test/support/vllm-standin.ts, option `weightTransfer`). Transcribed from vllm-project/vllm:
 *
 * - the routes: vllm/entrypoints/serve/dev/rlhf/api_router.py @0100a212 (the same handlers as
 *   vllm/entrypoints/rl/online/api_router.py @39929f1). With `VLLM_SERVER_DEV_MODE=1` only (option
 *   `devMode`; without it the router is not attached and every route is FastAPI's 404 `{"detail": "Not
 *   Found"}`). `POST /pause?mode=abort|wait|keep&clear_cache=` (query, default abort) -> `{"status":
 *   "paused"}`, a mode outside the three is FastAPI's 422; `POST /resume` -> `{"status": "resumed"}`; `GET
 *   /is_paused`; `POST /init_weight_transfer_engine {init_info}` -> `{"message": "Weight transfer
 *   initialized"}` (no `init_info`: 400 `{"detail": "Missing 'init_info' in request body"}`); `POST
 *   /start_weight_update` -> `{"message": "Weight update started"}`; `POST /update_weights {update_info}` ->
 *   `{"message": "Weights updated"}`; `POST /finish_weight_update {weight_version?}` -> `{"message": "Weight
 *   update finished"}`; `POST /update_weight_version {new_version}` -> `{"success": true, "new_version"}`
 *   (missing: FastAPI's 422); `GET /weight_info` -> `{"weight_version"}`; `GET /get_world_size` ->
 *   `{"world_size"}`. start/finish exist in the four-phase protocol only (docs latest/v0.29.0/v0.32.0;
 *   option `phases: 2` is an older server with init + update alone, no start/finish/weight_info/
 *   update_weight_version: DOCS v0.16.0).
 * - the pause modes (vllm/v1/engine/async_llm.py @00080ee1 `pause_generation`, docs/training/async_rl.md
 *   @006ebac): `abort` ends the requests in flight at once with `finish_reason: "abort"` (their partial
 *   output returned), `wait` waits for them to finish, `keep` freezes them and they go on after `/resume`;
 *   in every mode "New generation/encoding requests will not be scheduled until resume is called" (a request
 *   that arrives while paused gets nothing, not even its first chunk, until then).
 * - the weight version label (async_rl.md "Weight Versions in Outputs"): set by `finish_weight_update`'s
 *   `weight_version` or `update_weight_version`, opaque, "default" until set; vLLM's OpenAI chat answers
 *   do not carry it (vllm/entrypoints/openai/chat_completion/protocol.py @002032ee), so the stand-in keeps
 *   per request the labels its tokens were sampled under (`StandinCall.weightVersions`) for the tests alone.
 * - errors a worker raises (an engine's ValueError) reach the client through vLLM's exception handler as
 *   `{"error": {"message", "type", "param", "code"}}` with 400 for a ValueError and 500 otherwise
 *   (vllm/frontend/entrypoints/serve/exception_handling/error_response.py @055e47c2); how the exception
 *   crosses the engine-core process was not traced, so the stand-in answers the worker's message with 400
 *   for a bad update_info / init_info and 500 for a protocol-order error, and polar treats any non-2xx alike.
 * - the backends (`--weight-transfer-config '{"backend": ...}'`): `nccl` (init_info {master_address,
 *   master_port, rank_offset, world_size}; update_info {names, dtype_names, shapes, packed?}, each list as
 *   long as `names`: vllm/distributed/weight_transfer/nccl_engine.py @04b06efe; a wrong key is
 *   `ValueError("Invalid init_info ...")`, base.py parse_init_info), and `disk` (init_info {}; update_info
 *   {path}: absolute, a local directory, holding a `*.safetensors` file; one checkpoint per start/finish
 *   session; vllm/distributed/weight_transfer/disk_engine.py @3b98defb, an unreleased commit). The NCCL
 *   data plane itself is the test's (`receive`): the stand-in cannot join an NCCL group.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isAbsolute } from 'node:path';

export type TransferBackend = 'nccl' | 'disk' | 'ipc';
export type PauseMode = 'abort' | 'wait' | 'keep';

export interface WeightTransferOptions {
  /** `--weight-transfer-config '{"backend": ...}'`; null: started without it */
  backend: TransferBackend | null;
  /** 4 (current: start/finish, weight_info, update_weight_version) or 2 (older: init + update only) */
  phases?: 2 | 4;
  /** TP * PP * DP (default 1) */
  worldSize?: number;
  /** `GET /version` (default 0.32.0) */
  version?: string;
  /** /pause takes `mode` (default true; false: an older server with wait_for_inflight_requests only) */
  pauseModes?: boolean;
  /** the trainer's side of an NCCL rendezvous (default: accept at once) */
  init?: (initInfo: Record<string, unknown>) => Promise<void>;
  /** the NCCL data plane of one `/update_weights` (default: the tensors are taken as received) */
  receive?: (updateInfo: NcclUpdateInfo) => Promise<void>;
}

export interface NcclUpdateInfo {
  names: string[];
  dtype_names: string[];
  shapes: number[][];
  packed?: boolean;
}

/** One generation in flight, as the engine sees it. */
export interface Ticket {
  aborted: boolean;
  /** the labels its tokens were sampled under, in order */
  versions: string[];
  /** the weights that sampled its first token */
  weights: string;
}

export class VllmEngine {
  paused = false;
  private mode: PauseMode = 'abort';
  /** the label set last (null until one is: outputs say "default") */
  label: string | null = null;
  /** the weights served now: the model, or the checkpoint a disk update loaded, or `nccl:<n>` */
  weights: string;
  readonly inflight = new Set<Ticket>();
  private resumed: Array<() => void> = [];
  private drained: Array<() => void> = [];
  /** the routes called, in order (method path?query) */
  readonly log: string[] = [];
  initialized = false;
  private session: { loaded: string | null } | null = null;
  private ncclUpdates = 0;

  constructor(
    readonly options: WeightTransferOptions,
    model: string,
  ) {
    this.weights = model;
  }

  private get reported(): string {
    return this.label ?? 'default';
  }

  /** A request arrives: it is scheduled once the engine is not paused. */
  async admit(): Promise<Ticket> {
    while (this.paused) await new Promise<void>((r) => this.resumed.push(r));
    const ticket: Ticket = { aborted: false, versions: [this.reported], weights: this.weights };
    this.inflight.add(ticket);
    return ticket;
  }

  /** Before each chunk: frozen while paused with keep; false once the request was aborted. */
  async step(ticket: Ticket): Promise<boolean> {
    while (this.paused && this.mode === 'keep' && !ticket.aborted)
      await new Promise<void>((r) => this.resumed.push(r));
    if (ticket.aborted) return false;
    if (ticket.versions.at(-1) !== this.reported) ticket.versions.push(this.reported);
    return true;
  }

  finish(ticket: Ticket): void {
    this.inflight.delete(ticket);
    if (this.inflight.size === 0) for (const d of this.drained.splice(0)) d();
  }

  async pause(mode: PauseMode): Promise<void> {
    this.paused = true;
    this.mode = mode;
    if (mode === 'abort') for (const t of this.inflight) t.aborted = true;
    if (mode === 'wait') while (this.inflight.size > 0) await new Promise<void>((r) => this.drained.push(r));
  }

  resume(): void {
    this.paused = false;
    for (const r of this.resumed.splice(0)) r();
  }

  /** Serves a weight-transfer route; false when `path` is not one (the caller goes on). */
  async route(req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams) {
    const four = (this.options.phases ?? 4) === 4;
    const post = req.method === 'POST';
    const routes: Record<string, () => Promise<void> | void> = {
      'POST /pause': () => this.pauseRoute(res, query),
      'POST /resume': () => {
        this.resume();
        send(res, 200, { status: 'resumed' });
      },
      'GET /is_paused': () => send(res, 200, { is_paused: this.paused }),
      'GET /get_world_size': () => send(res, 200, { world_size: this.options.worldSize ?? 1 }),
      'POST /init_weight_transfer_engine': () => this.init(req, res),
      'POST /update_weights': () => this.update(req, res),
      ...(four
        ? {
            'POST /start_weight_update': () => this.start(res),
            'POST /finish_weight_update': () => this.finishUpdate(req, res),
            'POST /update_weight_version': () => this.setVersion(req, res),
            'GET /weight_info': () => send(res, 200, { weight_version: this.label }),
          }
        : {}),
    };
    const handler = routes[`${post ? 'POST' : req.method} ${path}`];
    if (!handler) return false;
    this.log.push(`${req.method} ${path}${query.size ? `?${query}` : ''}`);
    await handler();
    return true;
  }

  /** The paths `/openapi.json` lists for these routes. */
  paths(): string[] {
    const two = [
      '/pause',
      '/resume',
      '/is_paused',
      '/get_world_size',
      '/init_weight_transfer_engine',
      '/update_weights',
    ];
    const four = ['/start_weight_update', '/finish_weight_update', '/update_weight_version', '/weight_info'];
    return (this.options.phases ?? 4) === 4 ? [...two, ...four] : two;
  }

  private async pauseRoute(res: ServerResponse, query: URLSearchParams): Promise<void> {
    // an older /pause reads wait_for_inflight_requests only; the current one reads mode first, and a true
    // wait_for_inflight_requests makes it wait (deprecated, @0100a212)
    const older = this.options.pauseModes === false;
    const waits = query.get('wait_for_inflight_requests') === 'true';
    const mode = older ? (waits ? 'wait' : 'abort') : waits ? 'wait' : (query.get('mode') ?? 'abort');
    if (mode !== 'abort' && mode !== 'wait' && mode !== 'keep')
      return send(res, 422, {
        detail: [
          { type: 'literal_error', loc: ['query', 'mode'], msg: "Input should be 'abort', 'wait' or 'keep'" },
        ],
      });
    await this.pause(mode);
    send(res, 200, { status: 'paused' });
  }

  private async init(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    if (body === undefined) return send(res, 400, { detail: 'Invalid JSON format' });
    const info = (body as { init_info?: unknown }).init_info;
    if (info === undefined || info === null)
      return send(res, 400, { detail: "Missing 'init_info' in request body" });
    const backend = this.options.backend;
    if (backend === null)
      return engineError(
        res,
        500,
        'Weight transfer not configured. Please set weight_transfer_config to enable weight transfer.',
      );
    const keys = Object.keys(info as object).sort();
    const wanted = backend === 'nccl' ? ['master_address', 'master_port', 'rank_offset', 'world_size'] : [];
    if (JSON.stringify(keys) !== JSON.stringify(wanted))
      return engineError(
        res,
        400,
        `Invalid init_info for ${backend === 'nccl' ? 'NCCL' : 'disk'}WeightTransferEngine: ${JSON.stringify(info)}`,
      );
    await this.options.init?.(info as Record<string, unknown>);
    this.initialized = true;
    send(res, 200, { message: 'Weight transfer initialized' });
  }

  private start(res: ServerResponse) {
    if (this.session && this.options.backend === 'disk')
      return engineError(res, 500, 'A shared-disk weight update is already active');
    this.session = { loaded: null };
    send(res, 200, { message: 'Weight update started' });
  }

  private async update(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    if (body === undefined) return send(res, 400, { detail: 'Invalid JSON format' });
    const info = (body as { update_info?: unknown }).update_info as Record<string, unknown> | undefined;
    if (info === undefined || info === null)
      return send(res, 400, { detail: "Missing 'update_info' in request body" });
    if (!this.initialized)
      return engineError(
        res,
        500,
        'Weight transfer not initialized. Call init_weight_transfer_engine() first.',
      );
    if (this.options.backend === 'disk') return this.updateFromDisk(res, info);
    const names = info.names;
    const dtypes = info.dtype_names;
    const shapes = info.shapes;
    if (!Array.isArray(names) || !Array.isArray(dtypes) || !Array.isArray(shapes))
      return engineError(
        res,
        400,
        `Invalid update_info for NCCLWeightTransferEngine: ${JSON.stringify(Object.keys(info))}`,
      );
    if (dtypes.length !== names.length)
      return engineError(
        res,
        400,
        `\`dtype_names\` should be of the same size as \`names\`: got ${dtypes.length} and ${names.length}`,
      );
    if (shapes.length !== names.length)
      return engineError(
        res,
        400,
        `\`shapes\` should be of the same size as \`names\`: got ${shapes.length} and ${names.length}`,
      );
    await this.options.receive?.(info as unknown as NcclUpdateInfo);
    this.ncclUpdates++;
    if (this.session) this.session.loaded = `nccl:${this.ncclUpdates}`;
    else this.weights = `nccl:${this.ncclUpdates}`;
    send(res, 200, { message: 'Weights updated' });
  }

  /** disk_engine.py: DiskWeightTransferUpdateInfo.__post_init__ and receive_weights, in its order. */
  private updateFromDisk(res: ServerResponse, info: Record<string, unknown>) {
    const path = info.path;
    const keys = Object.keys(info);
    if (keys.some((k) => k !== 'path'))
      return engineError(
        res,
        400,
        `Invalid update_info for DiskWeightTransferEngine: ${JSON.stringify(keys)}`,
      );
    if (typeof path !== 'string' || !path)
      return engineError(res, 400, '`path` must be a non-empty absolute local directory');
    if (!isAbsolute(path)) return engineError(res, 400, '`path` must be an absolute local directory');
    if (!existsSync(path) || !statSync(path).isDirectory())
      return engineError(res, 400, `Shared-disk checkpoint path must be a local directory: ${path}`);
    if (!readdirSync(path).some((n) => n.endsWith('.safetensors')))
      return engineError(res, 400, `Shared-disk checkpoint directory contains no safetensors files: ${path}`);
    if (!this.session)
      return engineError(res, 500, 'start_weight_update must be called before loading a checkpoint');
    if (this.session.loaded)
      return engineError(res, 500, 'The disk backend accepts exactly one checkpoint per update session');
    this.session.loaded = path;
    send(res, 200, { message: 'Weights updated' });
  }

  private async finishUpdate(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = (await readBody(req)) as { weight_version?: unknown } | undefined;
    const session = this.session;
    this.session = null;
    const disk = this.options.backend === 'disk';
    if (!session && disk) return engineError(res, 500, 'No shared-disk weight update is active');
    if (!session?.loaded && disk)
      return engineError(res, 500, 'No checkpoint was loaded during the shared-disk update session');
    if (session?.loaded) this.weights = session.loaded;
    if (typeof body?.weight_version === 'string') this.label = body.weight_version;
    send(res, 200, { message: 'Weight update finished' });
  }

  private async setVersion(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = (await readBody(req)) as { new_version?: unknown } | undefined;
    if (typeof body?.new_version !== 'string')
      return send(res, 422, {
        detail: [{ type: 'missing', loc: ['body', 'new_version'], msg: 'Field required' }],
      });
    this.label = body.new_version;
    send(res, 200, { success: true, new_version: body.new_version });
  }
}

/** vLLM's error body for an engine exception (error_response.py create_error_response). */
function engineError(res: ServerResponse, status: number, message: string): void {
  send(res, status, {
    error: {
      message,
      type: status === 400 ? 'BadRequestError' : 'InternalServerError',
      param: null,
      code: status,
    },
  });
}

/** The JSON body, {} when empty, undefined when it does not parse. */
export async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const t = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(t) });
  res.end(t);
}
