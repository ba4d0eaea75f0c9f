/**
 * Publishing new weights to the backend between loop steps: a backend capability. The embedded backend
 * reloads in process (after an ONNX export); SGLang loads in place, from disk or over NCCL
 * (src/loop/publish-sglang.ts); vLLM takes full weights in place through its weight-transfer API, disk or
 * NCCL (src/loop/publish-vllm.ts), and loads a LoRA run's adapter at run time (each step a new adapter
 * name: new calls ask for it, calls in flight finish on the old one); anything else restarts through the
 * user's --reload-cmd and a readiness wait, which is also the fallback of a server without the API. What
 * the servers offer, with the source read: docs/loop.md "Publishing", docs/backends.md "Publishing new
 * weights".
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { authHeaders } from '../backends/http.ts';
import { rootUrl } from '../backends/server-info.ts';
import type { Backend, BackendOptions } from '../backends/types.ts';
import { waitForBackend } from '../backends/wait.ts';
import { PolarError, UsageError } from '../errors.ts';
import { request, timeLimit } from '../http/client.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { CHECKPOINT_FILES } from '../train/schema.ts';
import { log } from '../util/log.ts';
import { everyServer } from './publish-servers.ts';
import { sglangPublisher } from './publish-sglang.ts';
import { PublishError, type Publisher, type PublisherOptions } from './publish-types.ts';
import { vllmWeightTransferPublisher } from './publish-vllm.ts';

export { type PublishContext, PublishError, type Publisher, type PublisherOptions } from './publish-types.ts';

export function publisherFor(backend: Backend, options: PublisherOptions): Publisher {
  const choice = options.weightSync ?? DEFAULTS.weightSync.value;
  const restart = options.reloadCmd
    ? commandPublisher(
        backend,
        options,
        options.reloadCmd,
        options.readyTimeoutMs ?? DEFAULTS.reloadReadyTimeoutMs.value,
      )
    : null;
  if (choice === 'restart') {
    if (restart) return restart;
    throw new UsageError(
      '--weight-sync restart without --reload-cmd',
      'give --reload-cmd "<command that restarts the server on {checkpoint}>", or leave --weight-sync at auto',
    );
  }
  if (backend.kind === 'embedded') {
    if (restart) return restart;
    if (!backend.reload) throw new UsageError('this embedded backend cannot reload weights in process');
    return {
      needsOnnx: true,
      async publish({ onnx, version }) {
        if (!onnx) throw new PublishError('embedded publish needs an ONNX export of the checkpoint');
        await backend.reload!(onnx);
        if (version !== undefined) backend.policyVersion = version;
      },
    };
  }
  const servers = options.servers;
  // several servers: each publish goes to all of them (the restart, --reload-cmd's, restarts them all)
  const inPlace = (make: (b: Backend, o: PublisherOptions, fallback: Publisher | null) => Publisher) =>
    servers && servers.length > 1
      ? everyServer(backend, { ...options, servers }, (b, o) => make(b, o, null), restart)
      : make(backend, options, restart);
  if (backend.kind === 'sglang' || (backend.kind === 'tokens' && backend.url?.includes('/generate')))
    return inPlace(sglangPublisher);
  if (backend.kind === 'vllm' || backend.kind === 'tokens') {
    // a LoRA run loads each step's adapter at run time (or restarts, with --reload-cmd, as it did)
    if (options.lora) return restart ?? vllmLoraPublisher(backend, options);
    return inPlace(vllmWeightTransferPublisher);
  }
  if (restart) return restart;
  throw new UsageError(
    `the ${backend.kind} backend cannot load new weights by itself${choice === 'auto' ? '' : ` (--weight-sync ${choice} is for vLLM and SGLang)`}`,
    'give --reload-cmd "<command that restarts the server on {checkpoint}>" (polar waits until it answers again)',
  );
}

/**
 * vLLM with runtime LoRA updating (`VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`, `--enable-lora`): each step's
 * adapter (the checkpoint's adapter/ folder, peft layout) is loaded under a new name (`polar-step-N`) over
 * `POST /v1/load_lora_adapter {lora_name, lora_path}`; new calls ask for that name; the previous adapter is
 * then unloaded (`/v1/unload_lora_adapter`), which only takes its name off the served list, so calls
 * already running on it finish (vllm serve/lora/api_router.py, openai/serving_models.py).
 */
function vllmLoraPublisher(backend: Backend, options: PublisherOptions): Publisher {
  const root = rootUrl(backend.url ?? '');
  let previous: string | null = null;
  let count = 0;
  const post = async (route: string, body: unknown) => {
    const url = `${root}${route}`;
    try {
      const r = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...authHeaders(options.backendOptions.apiKey) },
        body: JSON.stringify(body),
        deadline: timeLimit(options.readyTimeoutMs ?? DEFAULTS.reloadReadyTimeoutMs.value),
        release: true,
      });
      return { status: r.status, ok: r.ok, text: await r.text() };
    } catch (error) {
      throw new PublishError(
        `vLLM's ${route} at ${url} failed: ${(error as Error).message}`,
        'check that the server runs and answers at --backend-url, or give --reload-cmd',
      );
    }
  };
  return {
    needsOnnx: false,
    async publish({ checkpoint, version }) {
      const adapter = join(checkpoint, CHECKPOINT_FILES.adapter);
      if (!existsSync(join(adapter, 'adapter_config.json')))
        throw new PublishError(
          `${checkpoint} holds no LoRA adapter (${adapter}/adapter_config.json)`,
          'vLLM loads LoRA adapters at run time only: train with --lora, or give --reload-cmd for full weights',
        );
      count++;
      const name = `polar-step-${version ?? `p${count}`}`;
      let r = await post('/v1/load_lora_adapter', { lora_name: name, lora_path: adapter });
      // a resumed run publishes a step again whose adapter the server still holds: load it afresh
      if (r.status === 400 && /already been loaded/.test(r.text)) {
        await post('/v1/unload_lora_adapter', { lora_name: name });
        r = await post('/v1/load_lora_adapter', { lora_name: name, lora_path: adapter });
      }
      if (!r.ok)
        throw new PublishError(
          `vLLM refused to load the LoRA adapter ${name} from ${adapter} (${r.status}): ${r.text.slice(0, 300)}`,
          // (vLLM's 404 for a path without an adapter says "No adapter found"; any other 404: no such route)
          r.status === 404 && !/No adapter found/.test(r.text)
            ? 'start vLLM with --enable-lora --max-lora-rank <r> and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True in its environment, or give --reload-cmd'
            : r.status === 401
              ? "give the server's key with --api-key (or $POLAR_BACKEND_API_KEY)"
              : 'check that the server can read the checkpoint directory and that --max-lora-rank covers the adapter',
        );
      if (!backend.serveModel)
        throw new PublishError(
          `the ${backend.kind} backend cannot switch its requests to the adapter ${name}`,
        );
      backend.serveModel(name);
      log.info(`publishing: vLLM serves the LoRA adapter ${name} (${adapter})`);
      if (previous && previous !== name) {
        const old = await post('/v1/unload_lora_adapter', { lora_name: previous });
        if (!old.ok)
          log.warn(
            `vLLM did not unload the previous adapter ${previous} (${old.status}): ${old.text.slice(0, 200)}`,
          );
      }
      previous = name;
    },
  };
}

function commandPublisher(
  backend: Backend,
  options: PublisherOptions,
  command: string,
  readyTimeoutMs: number,
): Publisher {
  return {
    needsOnnx: backend.kind === 'embedded',
    async publish({ checkpoint, onnx }) {
      const line = command.replaceAll('{checkpoint}', checkpoint).replaceAll('{onnx}', onnx ?? '');
      log.info(`publishing: ${line}`);
      const r = await execa('sh', ['-c', line], {
        reject: false,
        env: { POLAR_CHECKPOINT: checkpoint, ...(onnx ? { POLAR_ONNX: onnx } : {}) },
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      if (r.exitCode !== 0)
        throw new PublishError(`--reload-cmd exited with ${r.exitCode}`, `the command was: ${line}`);
      if (backend.kind === 'embedded' && onnx && backend.reload) await backend.reload(onnx);
      if (backend.url) await waitReady(backend, options.backendOptions, readyTimeoutMs);
    },
  };
}

/**
 * Waits for the restarted server: polls the route it really serves (/v1/models; NeMo RL: /tokenize)
 * with the run's key, telling the seconds left (src/backends/wait.ts).
 */
async function waitReady(backend: Backend, options: BackendOptions, timeoutMs: number): Promise<void> {
  try {
    await waitForBackend(
      { kind: backend.kind, url: backend.url, model: options.model, apiKey: options.apiKey },
      {
        timeoutMs,
        onWait: (left, url, why) =>
          log.info(`publishing: waiting for the restarted server at ${url} (${left} s left): ${why}`),
      },
    );
  } catch (error) {
    if (!PolarError.isInstance(error)) throw error;
    throw new PublishError(
      error.message,
      'check that --reload-cmd restarts the server on the new checkpoint, and its log',
    );
  }
}
