/**
 * SGLang's weight-update routes, pause/continue and weight version, for the SGLang stand-in
 * (test/support/sglang-standin.ts). Transcribed from sgl-project/sglang:
 *
 * - bodies: python/sglang/srt/managers/io_struct.py @001067ff: `UpdateWeightFromDiskReqInput` (model_path
 *   required; load_format, abort_all_requests=false, weight_version, flush_cache=true, ...),
 *   `InitWeightsUpdateGroupReqInput` (master_address, master_port, rank_offset, world_size required;
 *   group_name="weight_update_group", backend="nccl"), `UpdateWeightsFromDistributedReqInput` (names,
 *   dtypes, shapes required; group_name, flush_cache=true, abort_all_requests=false, weight_version,
 *   load_format), `DestroyWeightsUpdateGroupReqInput` (group_name), `UpdateWeightVersionReqInput`
 *   (new_version required; abort_all_requests defaults to **true**), `PauseGenerationReqInput` (mode
 *   abort|retract|in_place, default abort).
 * - answers: python/sglang/srt/entrypoints/http_server.py @0025436e (../shared/reference/weight-sync.md §2):
 *   the weight routes answer `{success, message}` with 200 on success and 400 on failure;
 *   update_weights_from_disk adds `num_paused_requests`; a weight_version given with a successful update
 *   becomes the server's (" Weight version updated to V." added to the message); `/update_weight_version`
 *   answers `{success: true, message: "Weight version updated to V", new_version}`; `/get_weight_version`
 *   `{weight_version}` (later servers: `/model_info`, and `/get_model_info` also holds it);
 *   `/pause_generation` and `/continue_generation` `{message, status: "ok"}`; a body that fails validation
 *   is the server's 400 `{object: "error", message, type: "Bad Request", code: 400}` (its handler turns
 *   FastAPI's 422 into 400).
 * - what an update does to requests in flight (weight-sync.md §2, io_struct.py's PauseGenerationReqInput):
 *   without `abort_all_requests` the update takes the model-update writer lock, so it waits for the
 *   requests being generated and new requests wait for it; with it they are aborted (finish_reason abort);
 *   pause `abort` aborts them, `retract` puts them back in the waiting queue (recomputed after continue:
 *   all their tokens the new weights'), `in_place` freezes them (their later tokens the new weights').
 * - the versions in answers: python/sglang/srt/utils/weight_versions.py @460534be (spans `{version, start,
 *   end}` over the output tokens, one per label) and serving_chat.py @0c078e6f (`metadata:
 *   {weight_version, weight_versions}` on a chat completion; `meta_info` with return_meta_info). The
 *   stand-in puts a label change of a frozen (in_place) request at half of its output.
 * The NCCL data plane is the test's (`receive`): the stand-in cannot join a torch.distributed group.
 */
import { existsSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readBody } from './vllm-weight-transfer.ts';

export interface SglangWeightOptions {
  /** the trainer's side of init_weights_update_group (default: accept at once) */
  init?: (body: Record<string, unknown>) => Promise<void>;
  /** the broadcast of one update_weights_from_distributed (default: the tensors are taken as received) */
  receive?: (body: { names: string[]; dtypes: string[]; shapes: number[][] }) => Promise<void>;
  /** an older SGLang: answers carry the single weight_version, no spans */
  noSpans?: boolean;
  /** an older SGLang: /pause_generation takes no body (no mode) */
  noPauseModes?: boolean;
}

/** A generation in flight: the labels that sampled it, and how it ends. */
export interface SglangTicket {
  aborted: boolean;
  /** labels at the start, and any set while it was frozen in place */
  versions: string[];
  retracted: boolean;
}

type Mode = 'abort' | 'retract' | 'in_place';

export class SglangEngine {
  weightVersion = 'default';
  modelPath: string;
  paused: Mode | null = null;
  readonly inflight = new Set<SglangTicket>();
  /** the weight-route bodies, in order (path and body) */
  readonly log: Array<{ path: string; body: Record<string, unknown> }> = [];
  readonly groups = new Set<string>();
  private waiters: Array<() => void> = [];

  constructor(
    readonly options: SglangWeightOptions,
    model: string,
  ) {
    this.modelPath = model;
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private async until(ready: () => boolean): Promise<void> {
    while (!ready()) await new Promise<void>((r) => this.waiters.push(r));
  }

  /** A request starts once no pause or update holds the scheduler. */
  async admit(): Promise<SglangTicket> {
    await this.until(() => this.paused === null && !this.updating);
    const t: SglangTicket = { aborted: false, versions: [this.weightVersion], retracted: false };
    this.inflight.add(t);
    return t;
  }

  /** The request has generated: it waits while frozen or retracted; false when it was aborted. */
  async complete(t: SglangTicket): Promise<boolean> {
    await this.until(() => t.aborted || this.paused === null);
    this.inflight.delete(t);
    this.wake();
    if (t.aborted) return false;
    if (t.retracted) t.versions = [this.weightVersion];
    else if (t.versions.at(-1) !== this.weightVersion) t.versions.push(this.weightVersion);
    return true;
  }

  private updating = false;

  /** The spans of an answer of `n` tokens sampled under `versions` (a change at half of the output). */
  spans(versions: string[], n: number): Array<{ version: string; start: number; end: number }> {
    if (versions.length === 1) return [{ version: versions[0]!, start: 0, end: n }];
    const half = Math.floor(n / 2);
    return [
      { version: versions[0]!, start: 0, end: half },
      { version: versions.at(-1)!, start: half, end: n },
    ];
  }

  /** `metadata` of a chat completion (serving_chat.py build_endpoint_weight_version_metadata). */
  metadata(versions: string[], n: number): Record<string, unknown> {
    return {
      weight_version: versions.at(-1),
      ...(this.options.noSpans ? {} : { weight_versions: this.spans(versions, n) }),
    };
  }

  private abortAll(): void {
    for (const t of this.inflight) t.aborted = true;
    this.wake();
  }

  /** FastAPI's /openapi.json of these routes and the chat one (a POST with a body names its request body). */
  openapi(): Record<string, unknown> {
    const body = { requestBody: { content: { 'application/json': {} } } };
    const paths: Record<string, unknown> = { '/v1/chat/completions': { post: body }, '/get_server_info': {} };
    for (const p of [
      '/update_weights_from_disk',
      '/init_weights_update_group',
      '/update_weights_from_distributed',
      '/destroy_weights_update_group',
      '/update_weight_version',
      '/continue_generation',
    ])
      paths[p] = { post: body };
    paths['/pause_generation'] = { post: this.options.noPauseModes ? {} : body };
    paths['/get_weight_version'] = {};
    paths['/get_model_info'] = {};
    return { openapi: '3.1.0', info: { title: 'FastAPI' }, paths };
  }

  /** Serves a weight route; false when `path` is not one. */
  async route(req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean> {
    const handlers: Record<string, (body: Record<string, unknown>) => Promise<void> | void> = {
      'POST /update_weights_from_disk': (b) => this.fromDisk(res, b),
      'POST /init_weights_update_group': (b) => this.initGroup(res, b),
      'POST /update_weights_from_distributed': (b) => this.fromDistributed(res, b),
      'POST /destroy_weights_update_group': (b) => {
        const group = String(b.group_name ?? 'weight_update_group');
        const had = this.groups.delete(group);
        send(res, had ? 200 : 400, {
          success: had,
          message: had ? 'Succeeded to destroy custom process group.' : `Group ${group} not found.`,
        });
      },
      'POST /update_weight_version': (b) => this.setVersion(res, b),
      'GET /get_weight_version': () => send(res, 200, { weight_version: this.weightVersion }),
      'GET /get_model_info': () =>
        send(res, 200, { model_path: this.modelPath, weight_version: this.weightVersion }),
      'POST /pause_generation': (b) => {
        const mode = (b.mode ?? 'abort') as Mode;
        this.paused = mode;
        if (mode === 'abort') this.abortAll();
        if (mode === 'retract') for (const t of this.inflight) t.retracted = true;
        send(res, 200, { message: 'Generation paused successfully.', status: 'ok' });
      },
      'POST /continue_generation': () => {
        this.paused = null;
        this.wake();
        send(res, 200, { message: 'Generation continued successfully.', status: 'ok' });
      },
    };
    const handler = handlers[`${req.method} ${path}`];
    if (!handler) return false;
    const body = req.method === 'POST' ? await readBody(req) : {};
    if (body === undefined || typeof body !== 'object' || body === null || Array.isArray(body)) {
      badRequest(res, 'JSON decode error');
      return true;
    }
    this.log.push({ path, body: body as Record<string, unknown> });
    await handler(body as Record<string, unknown>);
    return true;
  }

  /** the writer lock: waits for the requests in flight (or aborts them), holds new ones meanwhile */
  private async update<T>(
    abortAll: unknown,
    work: () => Promise<T> | T,
  ): Promise<{ value: T; paused: number }> {
    this.updating = true;
    const paused = this.paused ? this.inflight.size : 0;
    try {
      if (abortAll === true) this.abortAll();
      else if (this.paused === null) await this.until(() => this.inflight.size === 0);
      return { value: await work(), paused };
    } finally {
      this.updating = false;
      this.wake();
    }
  }

  private versioned(message: string, version: unknown): string {
    if (version === undefined || version === null) return message;
    this.weightVersion = String(version);
    return `${message} Weight version updated to ${this.weightVersion}.`;
  }

  private async fromDisk(res: ServerResponse, b: Record<string, unknown>): Promise<void> {
    if (typeof b.model_path !== 'string') return missing(res, 'model_path');
    const path = b.model_path;
    const { value: ok, paused } = await this.update(
      b.abort_all_requests,
      () => existsSync(path) && statSync(path).isDirectory(),
    );
    if (!ok)
      return send(res, 400, {
        success: false,
        message: `Failed to update weights: ${path} is not a model directory. Rolling back to the old weights.`,
        num_paused_requests: paused,
      });
    this.modelPath = path;
    const message = this.versioned('Succeeded to update model weights.', b.weight_version);
    send(res, 200, { success: true, message, num_paused_requests: paused });
  }

  private async initGroup(res: ServerResponse, b: Record<string, unknown>): Promise<void> {
    for (const f of ['master_address', 'master_port', 'rank_offset', 'world_size'])
      if (b[f] === undefined) return missing(res, f);
    const group = String(b.group_name ?? 'weight_update_group');
    try {
      await this.options.init?.(b);
    } catch (error) {
      return send(res, 400, {
        success: false,
        message: `Failed to init process group: ${(error as Error).message}.`,
      });
    }
    this.groups.add(group);
    send(res, 200, { success: true, message: 'Succeeded to initialize custom process group.' });
  }

  private async fromDistributed(res: ServerResponse, b: Record<string, unknown>): Promise<void> {
    for (const f of ['names', 'dtypes', 'shapes']) if (!Array.isArray(b[f])) return missing(res, f);
    const group = String(b.group_name ?? 'weight_update_group');
    if (!this.groups.has(group))
      return send(res, 400, {
        success: false,
        message: `Failed to update weights: group ${group} is not initialized.`,
      });
    const body = b as { names: string[]; dtypes: string[]; shapes: number[][] };
    try {
      await this.update(b.abort_all_requests, () => this.options.receive?.(body));
    } catch (error) {
      return send(res, 400, {
        success: false,
        message: `Failed to update weights: ${(error as Error).message}.`,
      });
    }
    this.modelPath = `distributed:${this.log.length}`;
    send(res, 200, {
      success: true,
      message: this.versioned('Succeeded to update parameter online.', b.weight_version),
    });
  }

  private setVersion(res: ServerResponse, b: Record<string, unknown>) {
    if (typeof b.new_version !== 'string') return missing(res, 'new_version');
    // UpdateWeightVersionReqInput.abort_all_requests defaults to true
    if (b.abort_all_requests !== false) this.abortAll();
    this.weightVersion = b.new_version;
    send(res, 200, {
      success: true,
      message: `Weight version updated to ${b.new_version}`,
      new_version: b.new_version,
    });
  }
}

/** SGLang's validation error, turned 400 by its handler. */
function missing(res: ServerResponse, field: string): void {
  badRequest(res, `[{'type': 'missing', 'loc': ('body', '${field}'), 'msg': 'Field required'}]`);
}

function badRequest(res: ServerResponse, message: string): void {
  send(res, 400, { object: 'error', message, type: 'Bad Request', param: null, code: 400 });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const t = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(t) });
  res.end(t);
}
