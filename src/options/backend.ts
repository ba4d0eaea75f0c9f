/** The backend flags every model-facing command shares, typed, and their resolution into BackendOptions. */
import type { BackendOptions } from '../backends/types.ts';
import { UsageError } from '../errors.ts';
import { DEFAULTS } from './defaults.ts';

export type BackendKind = BackendOptions['kind'];

/** `--backend ... --no-require-token-ids` after parsing (src/options/parsers.ts): numbers are numbers. */
export interface BackendFlags {
  backend?: BackendKind;
  backendUrl?: string;
  model?: string;
  apiKey?: string;
  tokenizer?: string;
  chatTemplateKwargs?: Record<string, unknown>;
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  maxTokensCap?: number;
  /** milliseconds */
  backendTimeout?: number;
  /** milliseconds */
  backendIdleTimeout?: number;
  /** false with --no-require-token-ids */
  requireTokenIds?: boolean;
}

/** The backend a command talks to: kind from --backend (else vllm with a URL, else embedded), and its model. */
export function backendOptions(flags: BackendFlags): BackendOptions {
  const kind: BackendKind = flags.backend ?? (flags.backendUrl ? 'vllm' : 'embedded');
  const model = flags.model ?? (kind === 'embedded' ? DEFAULTS.embeddedModel.value : undefined);
  if (!model) {
    throw new UsageError(
      `--backend ${kind} needs --model (the model name the server serves)`,
      'for example --model Qwen/Qwen3.5-4B',
    );
  }
  const options: BackendOptions = { kind, model };
  if (flags.backendUrl) options.url = flags.backendUrl;
  const apiKey = flags.apiKey ?? process.env.POLAR_BACKEND_API_KEY;
  if (apiKey) options.apiKey = apiKey;
  if (flags.tokenizer) options.tokenizer = flags.tokenizer;
  if (flags.chatTemplateKwargs) options.chatTemplateKwargs = flags.chatTemplateKwargs;
  if (flags.temperature !== undefined) options.temperature = flags.temperature;
  if (flags.topP !== undefined) options.topP = flags.topP;
  if (flags.maxTokens !== undefined) options.maxTokens = flags.maxTokens;
  if (flags.maxTokensCap !== undefined) options.maxTokensCap = flags.maxTokensCap;
  if (flags.backendTimeout !== undefined) options.timeoutMs = flags.backendTimeout;
  if (flags.backendIdleTimeout !== undefined) options.idleTimeoutMs = flags.backendIdleTimeout;
  if (flags.requireTokenIds === false) options.requireTokenIds = false;
  return options;
}
