/**
 * Weights to a running SGLang without a restart (sgl-project/sglang python/sglang/srt/entrypoints/
 * http_server.py @0025436e; bodies of python/sglang/srt/managers/io_struct.py @001067ff;
 * ../shared/reference/weight-sync.md §2):
 *
 * - from disk (the default): `POST /update_weights_from_disk {model_path, weight_version}`; 200 `{success,
 *   message, num_paused_requests}`, 400 with `success: false` when the load failed (SGLang rolls back to the
 *   old weights).
 * - distributed (--weight-sync nccl: trainer and server share a network, the trainer has a GPU):
 *   `POST /init_weights_update_group {master_address, master_port, rank_offset: 1, world_size: GPUs + 1,
 *   group_name, backend}` once while the sender joins as rank 0 (src/loop/weight-sender.ts), then each
 *   publish `POST /update_weights_from_distributed {names, dtypes, shapes, group_name, weight_version}`
 *   while the sender broadcasts the checkpoint's tensors in that order (slime's order: the group set up
 *   once, the update per step; weight-sync.md §3).
 *
 * Calls in flight (--weight-sync-pause): wait (the default) sends the update alone: it takes SGLang's
 * model-update writer lock, so the requests being generated finish first and new ones wait for it; abort
 * sets `abort_all_requests` (they end with finish_reason abort and the proxy sends them again); keep
 * pauses with `{"mode": "retract"}` (they go back to the waiting queue and are recomputed with the new
 * weights after `/continue_generation`). The version label is the loop step: `weight_version` with each
 * update, and `/update_weight_version {new_version, abort_all_requests: false}` at the start (its
 * abort_all_requests defaults to true). SGLang reports the label of each answer (its `metadata`), which the
 * call record keeps (capture format 3).
 */
import { resolve } from 'node:path';
import { rootUrl } from '../backends/server-info.ts';
import type { Backend } from '../backends/types.ts';
import {
  type AdminAnswer,
  adminCall,
  answerDetail,
  probeSglangWeights,
  type SglangWeightApi,
} from '../backends/weight-api.ts';
import { type PauseMode, type WeightUpdates, weightUpdatesOf } from '../backends/weight-updates.ts';
import { PolarError } from '../errors.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { log } from '../util/log.ts';
import {
  type PublishContext,
  PublishError,
  type Publisher,
  type PublisherOptions,
  PublishSetupError,
} from './publish-types.ts';
import { formGroup, type WeightSender } from './weight-sender.ts';

const GROUP = 'polar_weight_update';

export function sglangPublisher(
  backend: Backend,
  options: PublisherOptions,
  fallback: Publisher | null,
): Publisher {
  return new SglangWeights(backend, options, fallback);
}

class SglangWeights implements Publisher {
  readonly needsOnnx = false;
  private readonly root: string;
  private readonly mode: PauseMode;
  private readonly updates: WeightUpdates;
  private api: SglangWeightApi | null = null;
  private sender: WeightSender | null = null;

  constructor(
    private readonly backend: Backend,
    private readonly options: PublisherOptions,
    private readonly fallback: Publisher | null,
  ) {
    this.root = rootUrl(backend.url ?? '');
    this.mode = options.pause ?? DEFAULTS.weightSyncPause.value;
    this.updates = weightUpdatesOf(backend);
  }

  private get distributed(): boolean {
    return this.options.weightSync === 'nccl';
  }

  private async post(path: string, body: unknown): Promise<AdminAnswer> {
    try {
      return await adminCall(this.root, 'POST', path, body, {
        apiKey: this.options.backendOptions.apiKey,
        timeoutMs: this.options.readyTimeoutMs ?? DEFAULTS.reloadReadyTimeoutMs.value,
      });
    } catch (error) {
      throw new PublishError(
        `SGLang's weight update at ${this.root}${path} failed: ${(error as Error).message.replace(/^POST \S+ failed: /, '')}`,
        'check that the server runs and answers at --backend-url, or give --reload-cmd',
      );
    }
  }

  async prepare(version?: number): Promise<void> {
    const api = await probeSglangWeights(this.root, this.options.backendOptions.apiKey);
    this.api = api;
    if (this.mode === 'keep' && api.pauseModes === false)
      throw new PublishSetupError(
        `--weight-sync-pause keep, but the /pause_generation of SGLang at ${this.root} takes no mode (an older SGLang)`,
        'use --weight-sync-pause wait or abort, or an SGLang whose /pause_generation takes {"mode": "retract"}',
      );
    if (this.distributed) {
      if (api.distributed === false)
        throw new PublishSetupError(
          `SGLang at ${this.root}${api.version ? ` (${api.version})` : ''} has no /update_weights_from_distributed`,
          'an SGLang with the distributed weight update (init_weights_update_group), or --weight-sync disk',
        );
      this.sender = await this.joinGroup(api);
    }
    if (version !== undefined && api.versionRoute !== false) {
      const body = { new_version: String(version), abort_all_requests: false };
      const a = await this.post('/update_weight_version', body);
      if (!a.ok && a.status !== 404)
        throw new PublishError(`SGLang refused the weight version ${version} (${answerDetail(a)})`);
    }
    if (version !== undefined) this.backend.policyVersion = version;
    log.info(
      `publishing: SGLang weight update ${this.distributed ? 'over NCCL' : 'from disk'} (pause ${this.mode}) at ${this.root}`,
    );
  }

  private async joinGroup(a: SglangWeightApi): Promise<WeightSender> {
    const transport = this.options.transport ?? 'nccl';
    const world = (a.gpus ?? 1) + 1;
    const init = { server: 'sglang' as const, transport, world_size: world, group_name: GROUP };
    return formGroup(this.options, init, async (at) => {
      const body = { ...at, rank_offset: 1, world_size: world, group_name: GROUP, backend: transport };
      const answer = await this.post('/init_weights_update_group', body);
      if (!answer.ok)
        throw new PublishError(
          `SGLang refused to join the weight-update group at ${at.master_address}:${at.master_port} (${answerDetail(answer)})`,
          'give the address its workers reach this machine at with --weight-sync-address HOST[:PORT]',
        );
    });
  }

  /** The update route and its body (the weights, the version, what happens to the calls in flight). */
  private async update(checkpoint: string, version: number | undefined): Promise<AdminAnswer> {
    const common = {
      ...(version !== undefined ? { weight_version: String(version) } : {}),
      ...(this.mode === 'abort' ? { abort_all_requests: true } : {}),
    };
    if (!this.sender) return this.post('/update_weights_from_disk', { model_path: checkpoint, ...common });
    const sent = this.sender.send(resolve(checkpoint));
    const meta = await sent.meta;
    const answer = await this.post('/update_weights_from_distributed', {
      names: meta.names,
      dtypes: meta.dtype_names,
      shapes: meta.shapes,
      group_name: GROUP,
      ...common,
    });
    if (answer.ok) await sent.done;
    return answer;
  }

  async publish(context: PublishContext): Promise<void> {
    if (!this.api) await this.prepare();
    const t0 = performance.now();
    this.updates.begin(this.mode);
    let ok = false;
    try {
      if (this.mode === 'keep') await this.post('/pause_generation', { mode: 'retract' });
      const r = await this.update(context.checkpoint, context.version);
      if (!r.ok)
        throw new PublishError(
          `SGLang refused the weight update (${r.status}): ${r.text.slice(0, 300)}`,
          r.status === 401
            ? "give the server's key with --api-key (or $POLAR_BACKEND_API_KEY)"
            : 'check that the server can read the checkpoint directory, or give --reload-cmd',
        );
      ok = true;
      const paused = (r.json as { num_paused_requests?: unknown } | null)?.num_paused_requests;
      if (typeof paused === 'number' && paused > 0)
        log.info(
          `SGLang held ${paused} running requests during the weight update (they go on with the new weights)`,
        );
    } catch (error) {
      if (!this.fallback || !PolarError.isInstance(error)) throw error;
      log.warn(`${error.message}: restarting the server with --reload-cmd`);
      await this.sender?.abort();
      this.sender = null;
      this.api = null;
      await this.fallback.publish(context);
      ok = true;
    } finally {
      if (this.mode === 'keep') await this.post('/continue_generation', {}).catch(() => undefined);
      this.updates.end(ok ? context.version : undefined);
    }
    if (context.version !== undefined) this.backend.policyVersion = context.version;
    const seconds = ((performance.now() - t0) / 1000).toFixed(1);
    log.info(
      `publishing: SGLang took ${context.checkpoint} in place (${this.sender ? 'nccl' : 'disk'}, pause ${this.mode}) in ${seconds} s`,
    );
  }

  async close(): Promise<void> {
    await this.sender?.close();
  }
}
