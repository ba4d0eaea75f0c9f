/**
 * Full weights to a running vLLM without a restart: polar drives vLLM's weight-transfer HTTP control plane
 * (vllm entrypoints/serve/dev/rlhf/api_router.py @0100a212; docs/training/weight_transfer/README.md and
 * async_rl.md; ../shared/reference/weight-sync.md §1) and, for the NCCL backend, the trainer's side of the
 * broadcast (src/loop/weight-sender.ts). Which backend applies is the server's
 * `--weight-transfer-config '{"backend": ...}'`, read at the start (src/backends/weight-api.ts):
 *
 * - `disk` (the trainer's safetensors checkpoint on storage both see): init `{}` once; each publish
 *   `update_weights {update_info: {path}}` (vllm/distributed/weight_transfer/disk_engine.py @3b98defb: an
 *   absolute local directory with *.safetensors, one checkpoint per start/finish session; unreleased).
 * - `nccl` (trainer and server share a network, the trainer has a GPU): init `{master_address, master_port,
 *   rank_offset: 1, world_size: GET /get_world_size + 1}` once while the sender joins as rank 0; each
 *   publish `update_weights {update_info: {names, dtype_names, shapes}}` while the sender broadcasts the
 *   checkpoint's tensors in that order (nccl_engine.py @04b06efe, not packed).
 *
 * Each publish: `POST /pause?mode=` (wait, keep or abort: --weight-sync-pause) -> `start_weight_update` (the
 * four-phase API) -> `update_weights` -> `finish_weight_update {weight_version}` (older servers:
 * `update_weight_version`) -> `POST /resume`; the version label is the loop step, so each later call's
 * record names it (src/backends/weight-updates.ts). A server without the API is refused at the start with
 * the flags it needs; `--reload-cmd` (a restart) stays the fallback, also when an update fails. An update
 * that failed once weights were being loaded leaves the server paused (vLLM's update is not transactional:
 * the weights loaded before the error are in), never serving mixed weights silently.
 */
import { resolve } from 'node:path';
import { rootUrl } from '../backends/server-info.ts';
import type { Backend } from '../backends/types.ts';
import {
  type AdminAnswer,
  adminCall,
  answerDetail,
  probeVllmWeights,
  type VllmWeightApi,
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
import { formGroup, type SendMeta, type WeightSender } from './weight-sender.ts';

/** What a server started without the API needs, and which versions lack it (docs/loop.md). */
export const VLLM_WEIGHT_FLAGS =
  'start vLLM with VLLM_SERVER_DEV_MODE=1 in its environment and --weight-transfer-config \'{"backend": "nccl"}\' ' +
  '(or \'{"backend": "disk"}\' where the server has it)';
const VLLM_VERSIONS =
  'vLLM 0.15 and older have no HTTP weight-transfer routes (v0.14.0 has /pause and /resume only; v0.16.0 adds ' +
  '/init_weight_transfer_engine and /update_weights), 0.26 and older no start/finish routes, and the disk backend ' +
  'is in no release yet (one development commit)';

interface Prepared {
  api: VllmWeightApi;
  path: 'disk' | 'nccl';
  sender: WeightSender | null;
}

/** Why this server cannot take weights in place (message and fix), or null. */
function unusable(
  api: VllmWeightApi,
  choice: string,
  root: string,
): { message: string; hint: string } | null {
  const at = `vLLM at ${root}${api.version ? ` (${api.version})` : ''}`;
  if (!api.transferRoutes)
    return {
      message: `${at} offers no weight-transfer API: the routes /init_weight_transfer_engine and /update_weights do not answer`,
      hint: `${VLLM_WEIGHT_FLAGS}; ${VLLM_VERSIONS}; or give --reload-cmd to restart it on each checkpoint`,
    };
  if (api.backendKnown && api.backend === null)
    return {
      message: `${at} was started without --weight-transfer-config: it can take no weights in place`,
      hint: `${VLLM_WEIGHT_FLAGS}; or give --reload-cmd`,
    };
  const backend = api.backend ?? 'nccl';
  if (backend !== 'nccl' && backend !== 'disk')
    return {
      message: `${at} transfers weights with the ${backend} backend, which polar does not drive (it drives nccl and disk)`,
      hint: `${VLLM_WEIGHT_FLAGS}; or give --reload-cmd`,
    };
  if (choice !== 'auto' && choice !== backend)
    return {
      message: `--weight-sync ${choice}, but ${at} was started with the ${backend} backend`,
      hint: `start vLLM with --weight-transfer-config '{"backend": "${choice}"}', or use --weight-sync ${backend} (or auto)`,
    };
  return null;
}

export function vllmWeightTransferPublisher(
  backend: Backend,
  options: PublisherOptions,
  fallback: Publisher | null,
): Publisher {
  return new VllmWeightTransfer(backend, options, fallback);
}

class VllmWeightTransfer implements Publisher {
  readonly needsOnnx = false;
  private readonly root: string;
  private readonly mode: PauseMode;
  private readonly choice: string;
  private readonly updates: WeightUpdates;
  private state: Prepared | null = null;
  private restart = false;

  constructor(
    private readonly backend: Backend,
    private readonly options: PublisherOptions,
    private readonly fallback: Publisher | null,
  ) {
    this.root = rootUrl(backend.url ?? '');
    this.mode = options.pause ?? DEFAULTS.weightSyncPause.value;
    this.choice = options.weightSync ?? 'auto';
    this.updates = weightUpdatesOf(backend);
  }

  private call(path: string, body?: unknown): Promise<AdminAnswer> {
    return adminCall(this.root, 'POST', path, body ?? {}, {
      apiKey: this.options.backendOptions.apiKey,
      timeoutMs: this.options.readyTimeoutMs ?? DEFAULTS.reloadReadyTimeoutMs.value,
    });
  }

  private expect(a: AdminAnswer, what: string): void {
    if (a.ok) return;
    throw new PublishError(
      `vLLM refused ${what} (${answerDetail(a)})`,
      a.status === 401
        ? "give the server's key with --api-key (or $POLAR_BACKEND_API_KEY)"
        : `${VLLM_WEIGHT_FLAGS}, or give --reload-cmd`,
    );
  }

  private async setLabel(version: number | undefined): Promise<void> {
    if (version === undefined || !this.state?.api.versionRoutes) return;
    this.expect(
      await this.call('/update_weight_version', { new_version: String(version) }),
      'the weight version',
    );
  }

  private async initNccl(api: VllmWeightApi): Promise<WeightSender> {
    if (api.worldSize === null)
      throw new PublishSetupError(
        `vLLM at ${this.root} did not state its world size (GET /get_world_size)`,
        VLLM_WEIGHT_FLAGS,
      );
    const world = api.worldSize + 1;
    const transport = this.options.transport ?? 'nccl';
    return formGroup(this.options, { server: 'vllm', transport, world_size: world }, async (at) => {
      const answer = await this.call('/init_weight_transfer_engine', {
        init_info: { ...at, rank_offset: 1, world_size: world },
      });
      this.expect(answer, `to join the NCCL group at ${at.master_address}:${at.master_port}`);
    });
  }

  async prepare(version?: number): Promise<void> {
    const api = await probeVllmWeights(this.root, this.options.backendOptions.apiKey);
    const problem = unusable(api, this.choice, this.root);
    if (problem) {
      if (this.fallback && this.choice === 'auto') {
        log.warn(`${problem.message}: each publish restarts it with --reload-cmd`);
        this.restart = true;
        if (version !== undefined) this.backend.policyVersion = version;
        return this.fallback.prepare?.(version);
      }
      throw new PublishSetupError(problem.message, problem.hint);
    }
    if (this.mode === 'keep' && !api.pauseModes)
      throw new PublishSetupError(
        `--weight-sync-pause keep, but the /pause of vLLM at ${this.root} has no mode (an older vLLM: it waits or aborts)`,
        'use --weight-sync-pause wait or abort, or a vLLM whose /pause takes mode=keep',
      );
    const path = api.backend === 'disk' ? 'disk' : 'nccl';
    let sender: WeightSender | null = null;
    if (path === 'nccl') sender = await this.initNccl(api);
    else
      this.expect(
        await this.call('/init_weight_transfer_engine', { init_info: {} }),
        'to start its disk weight transfer',
      );
    this.state = { api, path, sender };
    await this.setLabel(version);
    if (version !== undefined) this.backend.policyVersion = version;
    log.info(
      `publishing: vLLM weight transfer (${path}, pause ${this.mode}${api.fourPhase ? '' : ', two-phase'}) at ${this.root}${api.version ? `, vLLM ${api.version}` : ''}`,
    );
  }

  /** The update proper, the server paused; `loading.started` once weights began to load. */
  private async update(
    s: Prepared,
    checkpoint: string,
    version: number | undefined,
    loading: { started: boolean },
  ) {
    if (s.api.fourPhase) this.expect(await this.call('/start_weight_update'), 'to start a weight update');
    if (s.path === 'disk') {
      const answer = await this.call('/update_weights', { update_info: { path: resolve(checkpoint) } });
      // a 400 is the disk engine's check of the path (DiskWeightTransferUpdateInfo, before any load; the
      // session is then ended by the engine): the old weights stay whole
      loading.started = answer.status !== 400;
      this.expect(answer, `to load ${checkpoint}`);
    } else {
      loading.started = true;
      const sent = s.sender!.send(resolve(checkpoint));
      const meta: SendMeta = await sent.meta;
      const answer = await this.call('/update_weights', { update_info: meta });
      this.expect(answer, `the ${meta.names.length} tensors of ${checkpoint}`);
      const stats = await sent.done;
      log.debug(`weight sender: ${stats.tensors} tensors, ${stats.bytes} bytes in ${stats.seconds} s`);
    }
    if (!s.api.fourPhase) return this.setLabel(version);
    const body = version === undefined ? {} : { weight_version: String(version) };
    this.expect(await this.call('/finish_weight_update', body), 'to finish the weight update');
  }

  async publish(context: PublishContext): Promise<void> {
    if (!this.state && !this.restart) await this.prepare();
    if (this.restart) return this.restartWith(context);
    const s = this.state!;
    const t0 = performance.now();
    const loading = { started: false };
    this.updates.begin(this.mode);
    try {
      const query = `mode=${this.mode}${this.mode === 'wait' ? '&wait_for_inflight_requests=true' : ''}`;
      this.expect(await this.call(`/pause?${query}`), `to pause (mode ${this.mode})`);
      await this.update(s, context.checkpoint, context.version, loading);
      this.expect(await this.call('/resume'), 'to resume');
    } catch (error) {
      this.updates.end(undefined);
      if (!PolarError.isInstance(error)) throw error;
      return this.failed(error, context, loading.started);
    }
    this.updates.end(context.version);
    if (context.version !== undefined) this.backend.policyVersion = context.version;
    const seconds = ((performance.now() - t0) / 1000).toFixed(1);
    log.info(
      `publishing: vLLM took ${context.checkpoint} in place (${s.path}, pause ${this.mode}) in ${seconds} s${context.version === undefined ? '' : `, weight version ${context.version}`}`,
    );
  }

  private async restartWith(context: PublishContext): Promise<void> {
    await this.fallback!.publish(context);
    if (context.version !== undefined) this.backend.policyVersion = context.version;
  }

  /** A failed update: --reload-cmd restarts the server on the checkpoint; without it polar stops here. */
  private async failed(error: PolarError, context: PublishContext, loaded: boolean): Promise<void> {
    if (this.fallback) {
      log.warn(`${error.message}: restarting the server with --reload-cmd`);
      await this.state?.sender?.abort();
      this.state = null; // the restarted server has a new engine: prepared again at the next publish
      return this.restartWith(context);
    }
    // a broadcast the server stopped taking never ends: the sender goes (the group is gone with it)
    if (loaded && this.state?.sender) {
      await this.state.sender.abort();
      this.state = null;
    }
    if (!loaded) {
      // nothing was loaded: the server serves the old weights, as before the pause
      await this.call('/resume').catch(() => undefined);
      throw error;
    }
    throw new PublishError(
      `${error.message}; vLLM is left paused: the weights it loaded before the error are in (its update is not transactional)`,
      'restart the server on the last published checkpoint and run again with --resume (which publishes it again), or give --reload-cmd to have polar restart it',
    );
  }

  async close(): Promise<void> {
    await this.state?.sender?.close();
  }
}
