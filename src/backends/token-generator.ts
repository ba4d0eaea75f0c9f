/**
 * The token-in/token-out seam shared by `--backend tokens` (vLLM /v1/completions, SGLang /generate)
 * and `--backend embedded` (in-process Transformers.js): prompt ids in, sampled ids and their
 * logprobs out. Prompt rendering, splicing and output parsing sit above it (src/backends/tokens.ts),
 * once for both.
 */
import type { ProxyFault } from '../protocols/canonical.ts';
import { fault } from '../protocols/canonical.ts';
import { CallDeadline } from './deadline.ts';
import {
  authHeaders,
  type BackendResponse,
  errorDetail,
  postJson,
  sseEvents,
  transportFault,
} from './http.ts';
import { ContextLength, rootUrl } from './server-info.ts';
import type { CallRecorder } from './types.ts';
import { reportedWeightVersions } from './weight-updates.ts';

export interface GenerateParams {
  promptIds: number[];
  maxTokens: number;
  /** 0 means greedy */
  temperature: number;
  topP: number;
  topK?: number;
  seed?: number;
  stopTokenIds: number[];
  /** stop strings (passed to servers that take them; for the embedded engine the token path applies them) */
  stop?: string[];
}

export interface TokenChunk {
  ids: number[];
  /** logprob of each sampled id under the sampling distribution; null where the server gave none */
  logprobs: (number | null)[];
}

export interface GenerateOutcome {
  finishReason: 'stop' | 'length';
  /** the prompt ids the server says it used, when it tells */
  serverPromptIds: number[] | null;
}

export interface GeneratorContext {
  signal: AbortSignal;
  recorder: CallRecorder;
}

export interface TokenGenerator {
  readonly kind: string;
  readonly url: string | null;
  /** model name sent to the server */
  readonly model: string;
  generate(params: GenerateParams, context: GeneratorContext): AsyncGenerator<TokenChunk, GenerateOutcome>;
  close(): Promise<void>;
  /** the model's context length when the server tells (prompt + max tokens must fit in it) */
  maxModelLen?(): Promise<number | null>;
}

/** A fault a generator raises; the backend turns it into the stream's `error` event. */
export class GeneratorFault extends Error {
  readonly fault: ProxyFault;
  constructor(kind: ProxyFault['kind'] | ProxyFault, message?: string) {
    const f = typeof kind === 'string' ? fault(kind, message ?? kind) : kind;
    super(f.message);
    this.fault = f;
  }
}

export type CompletionServer = 'vllm' | 'sglang';

/** HTTP token generator for vLLM (/v1/completions, streamed) and SGLang (/generate). */
export class HttpCompletions implements TokenGenerator {
  readonly kind: string;
  readonly url: string;
  private readonly base: string;
  private readonly headers: Record<string, string>;
  private readonly contextLength: ContextLength;

  constructor(
    readonly server: CompletionServer,
    url: string,
    readonly model: string,
    private readonly options: { apiKey?: string; timeoutMs?: number; idleTimeoutMs?: number } = {},
  ) {
    this.kind = server;
    this.base = rootUrl(url);
    this.url = server === 'vllm' ? `${this.base}/v1/completions` : `${this.base}/generate`;
    this.headers = authHeaders(options.apiKey);
    this.contextLength = new ContextLength(this.base, model, this.headers);
  }

  async close(): Promise<void> {}

  /**
   * vLLM's /v1/models states max_model_len, SGLang's model card too (http_server.py available_models:
   * `max_model_len=context_len`). vLLM takes prompt + max_tokens <= max_model_len; SGLang refuses
   * prompt + max_new_tokens >= context_len (tokenizer_manager._validate_one_request), so its usable
   * total is one token less.
   */
  async maxModelLen(): Promise<number | null> {
    const len = await this.contextLength.get();
    return len !== null && this.server === 'sglang' ? len - 1 : len;
  }

  async *generate(
    params: GenerateParams,
    context: GeneratorContext,
  ): AsyncGenerator<TokenChunk, GenerateOutcome> {
    const body = this.server === 'vllm' ? this.vllmBody(params) : this.sglangBody(params);
    context.recorder.backendRequest(this.url, body);
    // the limits hold for the whole call, body included (CallDeadline keeps its timers alive)
    const deadline = new CallDeadline(context.signal, this.options);
    try {
      // the one backend HTTP client (backends/http.ts): an error status is the server's error body,
      // mapped as for every backend (vLLM's nested or flat error, SGLang's /generate 400: a client error
      // is the harness's 400, a prompt over the context its context-length error, not a 502)
      const sent = await postJson(this.url, body, { deadline, headers: this.headers });
      if (!sent.ok) throw new GeneratorFault(sent.fault);
      try {
        if (this.server === 'vllm') return yield* this.readVllm(sent.response);
        return yield* this.readSglang(sent.response, context.recorder);
      } catch (error) {
        if (error instanceof GeneratorFault) throw error;
        throw new GeneratorFault(transportFault(this.url, error, deadline));
      }
    } finally {
      deadline.dispose();
    }
  }

  private vllmBody(params: GenerateParams): Record<string, unknown> {
    return {
      model: this.model,
      prompt: params.promptIds,
      max_tokens: params.maxTokens,
      temperature: params.temperature,
      top_p: params.topP,
      ...(params.topK !== undefined ? { top_k: params.topK } : {}),
      ...(params.seed !== undefined ? { seed: params.seed } : {}),
      ...(params.stop?.length ? { stop: params.stop } : {}),
      stop_token_ids: params.stopTokenIds,
      logprobs: 1,
      return_token_ids: true,
      skip_special_tokens: false,
      stream: true,
    };
  }

  private sglangBody(params: GenerateParams): Record<string, unknown> {
    return {
      input_ids: params.promptIds,
      sampling_params: {
        max_new_tokens: params.maxTokens,
        temperature: params.temperature,
        top_p: params.topP,
        ...(params.topK !== undefined ? { top_k: params.topK } : {}),
        ...(params.stop?.length ? { stop: params.stop } : {}),
        stop_token_ids: params.stopTokenIds,
        skip_special_tokens: false,
        // the seed is a sampling parameter in SGLang (io_struct.py SamplingParams.sampling_seed)
        ...(params.seed !== undefined ? { sampling_seed: params.seed } : {}),
      },
      return_logprob: true,
      stream: false,
    };
  }

  private async *readVllm(response: BackendResponse): AsyncGenerator<TokenChunk, GenerateOutcome> {
    let serverPromptIds: number[] | null = null;
    let finishReason: 'stop' | 'length' | null = null;
    let done = false;
    const handle = function* (this: HttpCompletions, data: string): Generator<TokenChunk> {
      if (data.trim() === '[DONE]') {
        done = true;
        return;
      }
      let chunk: VllmChunk;
      try {
        chunk = JSON.parse(data) as VllmChunk;
      } catch {
        throw new GeneratorFault('backend_error', `${this.url} sent a stream event that is not JSON`);
      }
      if (chunk.error)
        throw new GeneratorFault('backend_error', `${this.url}: ${errorDetail(JSON.stringify(chunk))}`);
      const choice = chunk.choices?.[0];
      const promptIds = chunk.prompt_token_ids ?? choice?.prompt_token_ids;
      if (Array.isArray(promptIds)) serverPromptIds = promptIds;
      if (!choice) return;
      const ids = choice.token_ids ?? idsFromTokens(choice.logprobs?.tokens);
      if (!ids) {
        if (choice.text) {
          throw new GeneratorFault(
            'backend_no_token_ids',
            `${this.url} returned text without token ids (vLLM >= 0.10.2 with return_token_ids is needed)`,
          );
        }
      } else if (ids.length > 0) {
        const lps = choice.logprobs?.token_logprobs ?? [];
        yield { ids, logprobs: ids.map((_, i) => (typeof lps[i] === 'number' ? (lps[i] as number) : null)) };
      }
      if (choice.finish_reason === 'abort') throw abortedFault(this.url);
      if (choice.finish_reason) finishReason = choice.finish_reason === 'length' ? 'length' : 'stop';
    };
    for await (const event of sseEvents(response)) yield* handle.call(this, event.data);
    if (!done && finishReason === null) {
      throw new GeneratorFault('backend_error', `${this.url} closed the stream before it finished`);
    }
    return { finishReason: finishReason ?? 'stop', serverPromptIds };
  }

  private async *readSglang(
    response: BackendResponse,
    recorder: CallRecorder,
  ): AsyncGenerator<TokenChunk, GenerateOutcome> {
    let body: SglangResponse;
    const text = await response.text();
    try {
      body = JSON.parse(text) as SglangResponse;
    } catch {
      throw new GeneratorFault('backend_error', `${this.url} answered ${errorDetail(text)}, not JSON`);
    }
    const entry = Array.isArray(body) ? body[0] : body;
    const finish = entry?.meta_info?.finish_reason;
    const type = typeof finish === 'string' ? finish : finish?.type;
    // SGLang's finish_reason is an object {type: stop|length|abort, matched|length|message}
    if (type === 'abort') {
      const message = typeof finish === 'object' ? finish?.message : undefined;
      throw abortedFault(this.url, message);
    }
    const triples = entry?.meta_info?.output_token_logprobs;
    let ids: number[] | undefined;
    let logprobs: (number | null)[] = [];
    if (Array.isArray(triples)) {
      ids = triples.map((t) => Number(t[1]));
      logprobs = triples.map((t) => (typeof t[0] === 'number' ? t[0] : null));
    } else if (Array.isArray(entry?.output_ids)) {
      ids = entry.output_ids;
      logprobs = ids.map(() => null);
    }
    if (!ids) {
      throw new GeneratorFault(
        'backend_no_token_ids',
        `${this.url} returned no output_token_logprobs (return_logprob)`,
      );
    }
    // the weights that sampled it (meta_info.weight_versions, or the single weight_version of older servers)
    const versions = reportedWeightVersions(entry);
    if (versions) recorder.weightVersions?.(versions);
    if (ids.length > 0) yield { ids, logprobs };
    return { finishReason: type === 'length' ? 'length' : 'stop', serverPromptIds: null };
  }
}

/** An `abort` finish: the server cancelled the request, so the sampled ids are not a completion. */
function abortedFault(url: string, message?: string | null): GeneratorFault {
  const f = fault(
    'backend_error',
    `${url} aborted the generation (finish_reason abort${message ? `: ${message}` : ''})`,
  );
  return new GeneratorFault({ ...f, aborted: true });
}

function idsFromTokens(tokens: unknown): number[] | undefined {
  if (!Array.isArray(tokens) || tokens.length === 0) return undefined;
  const ids: number[] = [];
  for (const token of tokens) {
    const m = typeof token === 'string' ? /^token_id:(\d+)$/.exec(token) : null;
    if (!m) return undefined;
    ids.push(Number(m[1]));
  }
  return ids;
}

interface VllmChunk {
  error?: { message?: string };
  prompt_token_ids?: number[];
  choices?: {
    text?: string;
    token_ids?: number[];
    prompt_token_ids?: number[];
    finish_reason?: string | null;
    logprobs?: { token_logprobs?: (number | null)[]; tokens?: string[] } | null;
  }[];
}

type SglangEntry = {
  text?: string;
  output_ids?: number[];
  meta_info?: {
    output_token_logprobs?: [number | null, number, string | null][];
    finish_reason?: string | { type?: string; message?: string | null } | null;
  };
};
type SglangResponse = SglangEntry | SglangEntry[];
