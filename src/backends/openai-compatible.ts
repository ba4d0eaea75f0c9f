/**
 * Backends that speak OpenAI Chat Completions: vLLM (token ids streamed: `return_token_ids` +
 * `logprobs`), SGLang (token ids only without streaming: `return_prompt_token_ids` + `return_meta_info`,
 * so the call is made non-streaming and the harness stream is synthesised), and any OpenAI-compatible
 * upstream (text only: records say token_exact false).
 */
import { randomUUID } from 'node:crypto';
import { type CanonicalRequest, fault, type StreamEvent } from '../protocols/canonical.ts';
import { buildRequest, ChatStreamParser, completionToEvents } from '../protocols/openai-chat/index.ts';
import { CallDeadline } from './deadline.ts';
import { postJson, sseEvents, transportFault, trimSlash } from './http.ts';
import type { Backend, BackendOptions, CallContext } from './types.ts';

type Flavour = 'vllm' | 'sglang' | 'openai';

const EXTRA: Record<Flavour, Record<string, unknown>> = {
  // vLLM >= 0.10.2: prompt_token_ids in the first chunk, token_ids per choice delta, logprobs.content
  vllm: { return_token_ids: true, logprobs: true, top_logprobs: 0, skip_special_tokens: false },
  // SGLang OpenAI endpoint: ids and per-token logprobs in meta_info, non-streaming only
  sglang: { return_prompt_token_ids: true, return_meta_info: true, logprobs: true, top_logprobs: 0 },
  openai: {},
};

export class OpenAICompatibleBackend implements Backend {
  readonly kind: Flavour;
  readonly tokenExact: boolean;
  readonly url: string;
  private readonly options: BackendOptions;
  private readonly requireIds: boolean;
  private readonly headers: Record<string, string>;

  constructor(kind: Flavour, options: BackendOptions) {
    if (!options.url) throw new Error(`--backend-url is required for --backend ${kind}`);
    this.kind = kind;
    this.url = trimSlash(options.url);
    this.options = options;
    this.tokenExact = kind !== 'openai';
    this.requireIds = options.requireTokenIds ?? kind !== 'openai';
    this.headers = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {};
  }

  /** the limits of one call, from the request to the end of its body */
  private deadline(signal: AbortSignal, totalMs?: number): CallDeadline {
    const total = totalMs ?? this.options.timeoutMs;
    return new CallDeadline(signal, {
      ...(total !== undefined ? { totalMs: total } : {}),
      ...(this.options.idleTimeoutMs !== undefined ? { idleMs: this.options.idleTimeoutMs } : {}),
    });
  }

  async *generate(request: CanonicalRequest, context: CallContext): AsyncGenerator<StreamEvent> {
    const deadline = this.deadline(context.signal);
    try {
      yield* this.generateWithin(request, context, deadline);
    } finally {
      deadline.dispose();
    }
  }

  private async *generateWithin(
    request: CanonicalRequest,
    context: CallContext,
    deadline: CallDeadline,
  ): AsyncGenerator<StreamEvent> {
    const stream = this.kind !== 'sglang';
    const body = buildRequest(
      { ...request, model: this.options.model },
      {
        stream,
        extra: {
          ...EXTRA[this.kind],
          ...(this.options.chatTemplateKwargs
            ? { chat_template_kwargs: this.options.chatTemplateKwargs }
            : {}),
        },
        defaults: {
          ...(this.options.temperature !== undefined ? { temperature: this.options.temperature } : {}),
          ...(this.options.topP !== undefined ? { topP: this.options.topP } : {}),
          ...(this.options.maxTokens !== undefined ? { maxTokens: this.options.maxTokens } : {}),
        },
      },
    );
    const url = `${this.url}/chat/completions`;
    // messages and tools are a pure function of canonical_request (buildRequest); recording them again
    // would triple the size of every call record, so the record points at them instead
    context.recorder.backendRequest(url, {
      ...body,
      messages: '<canonical_request.messages>',
      tools: body.tools ? '<canonical_request.tools>' : undefined,
    });
    const outcome = await postJson(url, body, { deadline, headers: this.headers });
    if (!outcome.ok) {
      yield { type: 'error', error: outcome.fault };
      return;
    }
    const id = `resp_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
    if (!stream) {
      yield* this.fromCompletion(outcome.response, id, context, deadline);
      return;
    }
    const parser = new ChatStreamParser(id, request.model);
    let first = true;
    try {
      // read to the end of the body even after [DONE]: leaving early cancels the body, and the
      // HTTP client then closes the keep-alive connection instead of reusing it
      for await (const event of sseEvents(outcome.response, deadline)) {
        if (event.data === '[DONE]') continue;
        let chunk: unknown;
        try {
          chunk = JSON.parse(event.data);
        } catch {
          context.recorder.warn(`backend sent a non-JSON SSE data line: ${event.data.slice(0, 200)}`);
          continue;
        }
        if ((chunk as { error?: unknown }).error) {
          yield {
            type: 'error',
            error: fault('backend_error', `backend stream error: ${JSON.stringify(chunk).slice(0, 300)}`),
          };
          return;
        }
        if (first) {
          first = false;
          if (this.requireIds && !(chunk as { prompt_token_ids?: unknown }).prompt_token_ids) {
            yield { type: 'error', error: this.noIds('prompt_token_ids missing from the first chunk') };
            return;
          }
        }
        yield* parser.push(chunk);
      }
    } catch (error) {
      yield { type: 'error', error: transportFault(url, error, deadline) };
      return;
    }
    for (const w of parser.warnings) context.recorder.warn(w);
    if (!parser.finished) {
      yield {
        type: 'error',
        error: fault('backend_error', 'backend stream ended before a finish_reason (connection lost?)'),
      };
      return;
    }
    const done = parser.end();
    const problem = this.checkTokens(done.tokens, context);
    if (problem) {
      yield { type: 'error', error: problem };
      return;
    }
    yield* done.events;
  }

  private async *fromCompletion(
    response: Response,
    id: string,
    context: CallContext,
    deadline: CallDeadline,
  ): AsyncGenerator<StreamEvent> {
    let raw: unknown;
    try {
      raw = await response.json();
    } catch (error) {
      yield {
        type: 'error',
        error: deadline.timedOut
          ? deadline.fault(response.url || this.url)
          : fault('backend_error', `backend answered non-JSON: ${(error as Error).message}`),
      };
      return;
    }
    const done = completionToEvents(raw, id, this.options.model);
    if (!done) {
      yield { type: 'error', error: fault('backend_error', 'backend answer is not a chat completion') };
      return;
    }
    const problem = this.checkTokens(done.tokens, context);
    if (problem) {
      yield { type: 'error', error: problem };
      return;
    }
    yield* done.events;
  }

  private noIds(detail: string) {
    return fault(
      'backend_no_token_ids',
      `${this.kind} backend returned no token ids (${detail}); use a server version that supports them, or --backend openai for text-only capture`,
    );
  }

  /** Reports token data to the recorder; returns a fault when ids are required but missing. */
  private checkTokens(
    tokens: {
      promptTokenIds: number[] | null;
      completionTokenIds: number[] | null;
      completionLogprobs: number[] | null;
    },
    context: CallContext,
  ) {
    if (this.kind === 'openai') {
      context.recorder.tokens({ promptTokenIds: null, completionTokenIds: null, completionLogprobs: null });
      return null;
    }
    if (this.requireIds && (!tokens.promptTokenIds || !tokens.completionTokenIds)) {
      return this.noIds(tokens.promptTokenIds ? 'completion token_ids missing' : 'prompt_token_ids missing');
    }
    let logprobs = tokens.completionLogprobs;
    if (logprobs && tokens.completionTokenIds && logprobs.length !== tokens.completionTokenIds.length) {
      context.recorder.warn(
        `backend gave ${logprobs.length} logprobs for ${tokens.completionTokenIds.length} token ids; logprobs dropped`,
      );
      logprobs = null;
    }
    context.recorder.tokens({ ...tokens, completionLogprobs: logprobs });
    return null;
  }

  async countTokens(
    request: CanonicalRequest,
    context: CallContext,
  ): Promise<{ tokens: number; exact: boolean }> {
    if (this.kind === 'vllm') {
      // vLLM serves /tokenize at the server root, beside /v1
      const root = this.url.replace(/\/v1$/, '');
      const body = buildRequest({ ...request, model: this.options.model }, { stream: false });
      const deadline = this.deadline(context.signal, 30_000);
      try {
        const outcome = await postJson(
          `${root}/tokenize`,
          {
            model: this.options.model,
            messages: body.messages,
            ...(body.tools ? { tools: body.tools } : {}),
          },
          { deadline, headers: this.headers },
        );
        if (outcome.ok) {
          const json = (await outcome.response.json().catch(() => null)) as { count?: number } | null;
          if (typeof json?.count === 'number') return { tokens: json.count, exact: true };
        }
      } finally {
        deadline.dispose();
      }
    }
    return { tokens: estimateTokens(request), exact: false };
  }

  async close(): Promise<void> {}
}

/** About 4 characters a token: used only when the server cannot count. */
export function estimateTokens(request: CanonicalRequest): number {
  const text = JSON.stringify(request.messages) + JSON.stringify(request.tools);
  return Math.ceil(text.length / 4);
}
