/** The backend flags every model-facing command shares, typed, and their resolution into BackendOptions. */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError } from '../errors.ts';
import { CHECKPOINT_FILES } from '../train/schema.ts';
import { DEFAULTS } from './defaults.ts';

/** A backend as its flags resolve it: what createBackend (src/backends/index.ts) makes one from. */
export interface BackendOptions {
  kind: 'vllm' | 'sglang' | 'openai' | 'tokens' | 'embedded' | 'nemo-rl';
  url?: string;
  model: string;
  apiKey?: string;
  /** ms before a backend call is abandoned, streaming or not (default DEFAULTS.backendTimeoutMs) */
  timeoutMs?: number;
  /** ms a started response may send nothing before the call is abandoned; 0: no limit (default DEFAULTS.backendIdleTimeoutMs) */
  idleTimeoutMs?: number;
  /** fail calls whose answer lacks token ids (default: true for vllm/sglang/tokens/embedded) */
  requireTokenIds?: boolean;
  /** tokenizer dir or hub id (tokens, embedded) */
  tokenizer?: string;
  /** passed to the chat template (e.g. { enable_thinking: false }) */
  chatTemplateKwargs?: Record<string, unknown>;
  /** sampling defaults when the harness gives none */
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  /**
   * tokens and embedded: sampling seed of the run; call k (in the order calls reach the backend) samples
   * with seed + k, so a run at concurrency 1 repeats exactly (vLLM's and SGLang's per-request seed)
   */
  seed?: number;
  /** hard cap on every call's completion tokens, whatever the harness asks (CPU runs, quick loops) */
  maxTokensCap?: number;
  /** skip the set-up probe commands run before a harness starts (--skip-backend-check; src/backends/wait.ts) */
  skipCheck?: boolean;
}

export type BackendKind = BackendOptions['kind'];

/** `--backend ... --no-require-token-ids` after parsing (src/options/parsers.ts): numbers are numbers. */
export interface BackendFlags {
  backend?: BackendKind;
  /** one server, or several (eval, loop, gym: --backend-url A,B or repeated) */
  backendUrl?: string | string[];
  model?: string;
  apiKey?: string;
  tokenizer?: string;
  chatTemplateKwargs?: Record<string, unknown>;
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  maxTokensCap?: number;
  seed?: number;
  /** milliseconds */
  backendTimeout?: number;
  /** milliseconds */
  backendIdleTimeout?: number;
  /** false with --no-require-token-ids */
  requireTokenIds?: boolean;
  /** --skip-backend-check: no set-up probe before the harness starts */
  skipBackendCheck?: boolean;
}

/**
 * The backend a command talks to: kind from --backend (else vllm with a URL, else embedded), and its model.
 * `exportsCheckpoints`: the caller exports --model to ONNX itself before the embedded engine loads it
 * (polar loop), so a training checkpoint there is what it expects.
 */
/** --backend-url as a list (one server, several, or none). */
export function backendUrls(flags: Pick<BackendFlags, 'backendUrl'>): string[] {
  const value = flags.backendUrl;
  return value === undefined ? [] : typeof value === 'string' ? [value] : value;
}

export function backendOptions(
  flags: BackendFlags,
  { exportsCheckpoints = false }: { exportsCheckpoints?: boolean } = {},
): BackendOptions {
  const url = backendUrls(flags)[0];
  const kind: BackendKind = flags.backend ?? (url ? 'vllm' : 'embedded');
  const model = flags.model ?? (kind === 'embedded' ? DEFAULTS.embeddedModel.value : undefined);
  if (!model) {
    throw new UsageError(
      `--backend ${kind} needs --model (the model name the server serves)`,
      'for example --model Qwen/Qwen3.5-4B',
    );
  }
  if (kind !== 'embedded' && !url) {
    throw new UsageError(
      `--backend ${kind} needs --backend-url`,
      kind === 'tokens'
        ? 'point it at a vLLM (http://host:8000) or SGLang (http://host:30000/generate) server'
        : 'for example --backend-url http://127.0.0.1:8000/v1',
    );
  }
  if (kind === 'embedded' && !exportsCheckpoints) checkEmbeddedModel(model);
  const options: BackendOptions = { kind, model };
  if (url) options.url = url;
  const apiKey = flags.apiKey ?? process.env.POLAR_BACKEND_API_KEY;
  if (apiKey) options.apiKey = apiKey;
  if (flags.tokenizer) options.tokenizer = flags.tokenizer;
  if (flags.chatTemplateKwargs) options.chatTemplateKwargs = flags.chatTemplateKwargs;
  if (flags.temperature !== undefined) options.temperature = flags.temperature;
  if (flags.topP !== undefined) options.topP = flags.topP;
  if (flags.maxTokens !== undefined) options.maxTokens = flags.maxTokens;
  if (flags.maxTokensCap !== undefined) options.maxTokensCap = flags.maxTokensCap;
  if (flags.seed !== undefined) options.seed = flags.seed;
  if (flags.backendTimeout !== undefined) options.timeoutMs = flags.backendTimeout;
  if (flags.backendIdleTimeout !== undefined) options.idleTimeoutMs = flags.backendIdleTimeout;
  if (flags.requireTokenIds === false) options.requireTokenIds = false;
  if (flags.skipBackendCheck) options.skipCheck = true;
  return options;
}

/**
 * The embedded backend runs ONNX models (Transformers.js): a local --model directory must hold
 * onnx/model.onnx. A `polar train` checkpoint (safetensors) is served by vLLM/SGLang, or exported first.
 */
function checkEmbeddedModel(model: string): void {
  if (!existsSync(model) || !statSync(model).isDirectory()) return;
  if (existsSync(join(model, 'onnx'))) return;
  const checkpoint =
    existsSync(join(model, CHECKPOINT_FILES.latest)) ||
    existsSync(join(model, CHECKPOINT_FILES.state)) ||
    existsSync(join(model, 'model.safetensors')) ||
    existsSync(join(model, 'adapter_model.safetensors')) ||
    existsSync(join(model, 'model.safetensors.index.json'));
  throw new UsageError(
    `--model ${model}: ${checkpoint ? 'a training checkpoint' : 'a directory'} without onnx/model.onnx, which --backend embedded (ONNX, Transformers.js) needs`,
    `serve it with vLLM or SGLang (--backend vllm --backend-url http://127.0.0.1:8000/v1 --model ${model}), or export it first: polar export ${model} --out ${model.replace(/\/+$/, '')}-onnx, then --model ${model.replace(/\/+$/, '')}-onnx`,
  );
}
