/**
 * The seam between the proxy and inference servers. The proxy converts a harness request to the
 * canonical form, asks a Backend to generate, and renders the canonical stream back in the harness's
 * wire API. Backends: vllm / sglang / openai (chat completions), tokens (token-in/token-out with
 * splicing), embedded (in-process Transformers.js), nemo-rl (NeMo RL's generation server).
 */
import type { CanonicalRequest, StreamEvent, TokenData } from '../protocols/canonical.ts';

/** What a backend tells the recorder about one call; everything lands in the call record. */
export interface CallRecorder {
  /** the body sent to the inference server and where */
  backendRequest(url: string, body: unknown): void;
  tokens(data: TokenData): void;
  warn(message: string): void;
  /** extra per-call facts (splices, render mismatches, parse errors): merged into the record's `backend_info` */
  annotate(key: string, value: unknown): void;
}

export interface CallContext {
  sessionId: string;
  callId: string;
  /** aborted when the harness disconnects or the proxy shuts down */
  signal: AbortSignal;
  recorder: CallRecorder;
  /** per-session scratch space a backend may keep between calls (e.g. the turns it sampled, for splicing) */
  sessionState: Map<string, unknown>;
}

export interface Backend {
  readonly kind: string;
  /** true when the backend returns the exact prompt and sampled token ids with logprobs */
  readonly tokenExact: boolean;
  readonly url: string | null;
  /**
   * Generates one completion as a stream of canonical events: 'start', deltas, then exactly one
   * 'finish' or 'error'. Never throws once iteration starts: faults become an 'error' event.
   */
  generate(request: CanonicalRequest, context: CallContext): AsyncIterable<StreamEvent>;
  /** prompt token count for Anthropic's count_tokens; may be an estimate when the server can't tell */
  countTokens(request: CanonicalRequest, context: CallContext): Promise<{ tokens: number; exact: boolean }>;
  close(): Promise<void>;
  /**
   * Serve another model from the next call on (embedded backend: a model directory such as one written
   * by `polar export`); calls already started finish on the old one. Absent on backends that cannot.
   */
  reload?(modelDir: string): Promise<void>;
  /**
   * Ask the server for another served model from the next call on (vLLM: a LoRA adapter loaded at run
   * time); calls already sent keep theirs. Absent on backends that cannot.
   */
  serveModel?(name: string): void;
  /**
   * the policy version new calls are served by (polar loop: the last published step), recorded in each
   * call record as `policy_version`; undefined outside a loop
   */
  policyVersion?: number;
}

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
