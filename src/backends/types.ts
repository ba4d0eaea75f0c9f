/**
 * The seam between the proxy and inference servers. The proxy converts a harness request to the
 * canonical form, asks a Backend to generate, and renders the canonical stream back in the harness's
 * wire API. Backends: vllm / sglang / openai (chat completions), tokens (token-in/token-out with
 * splicing), embedded (in-process Transformers.js), nemo-rl (NeMo RL's generation server).
 */
import type { BackendOptions } from '../options/backend.ts';
import type { CanonicalRequest, StreamEvent, TokenData } from '../protocols/canonical.ts';
import type { ReportedWeightVersions, WeightUpdates } from './weight-updates.ts';

/** What a backend tells the recorder about one call; everything lands in the call record. */
export interface CallRecorder {
  /** the body sent to the inference server and where */
  backendRequest(url: string, body: unknown): void;
  tokens(data: TokenData): void;
  warn(message: string): void;
  /** extra per-call facts (splices, render mismatches, parse errors): merged into the record's `backend_info` */
  annotate(key: string, value: unknown): void;
  /** the weight versions the server reported for this call (SGLang); absent on recorders that do not keep them */
  weightVersions?(reported: ReportedWeightVersions): void;
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
  /**
   * the weight updates polar loop makes on the running server (src/backends/weight-updates.ts): read by the
   * proxy to record the versions a call was sampled by and to send again a call an update aborted
   */
  weightUpdates?: WeightUpdates;
}

/** What a backend is made from: --backend and its flags resolved (src/options/backend.ts). */
export type { BackendOptions };
