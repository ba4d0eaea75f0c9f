/**
 * Backends that speak OpenAI Chat Completions: vLLM (token ids streamed: `return_token_ids` +
 * `logprobs`), SGLang (token ids only without streaming: `return_prompt_token_ids` + `return_meta_info`,
 * so the call is made non-streaming and the harness stream is synthesised), and any OpenAI-compatible
 * upstream (text only: records say token_exact false).
 *
 * Facts this file relies on (../shared/reference/real-servers.md): vLLM answers 400 when prompt +
 * max_tokens exceeds max_model_len, so a harness's max_tokens is fitted to what is left (src/backends/
 * context-fit.ts); vLLM 0.10.2 until PR #29074 drops the streamed ids of chunks its tool parser swallows
 * while usage.completion_tokens stays true, so ids are checked against usage (src/backends/token-check.ts);
 * `finish_reason: "abort"` is a cancelled request, not a completion.
 */
import { randomUUID } from 'node:crypto';
import { trimSlash } from '../http/client.ts';
import { type CanonicalRequest, fault, type ProxyFault, type StreamEvent } from '../protocols/canonical.ts';
import { buildRequest, ChatStreamParser, completionToEvents } from '../protocols/openai-chat/index.ts';
import { log } from '../util/log.ts';
import { parseWithPromptIds } from '../util/prompt-ids.ts';
import { fitMaxTokens, retryAfterContextFault } from './context-fit.ts';
import { CallDeadline } from './deadline.ts';
import {
  authHeaders,
  type BackendResponse,
  errorDetail,
  type FetchOutcome,
  postJson,
  sseEvents,
  transportFault,
} from './http.ts';
import { ContextLength, tokenizeChat } from './server-info.ts';
import { abortFault, checkCompletionIds, type IdsCheck } from './token-check.ts';
import type { Backend, BackendOptions, CallContext } from './types.ts';
import { reportedWeightVersions } from './weight-updates.ts';

type Flavour = 'vllm' | 'sglang' | 'openai';

const EXTRA: Record<Flavour, Record<string, unknown>> = {
  // vLLM >= 0.10.2: prompt_token_ids in the first chunk, token_ids per choice delta, logprobs.content
  vllm: { return_token_ids: true, logprobs: true, top_logprobs: 0, skip_special_tokens: false },
  // SGLang OpenAI endpoint: ids and per-token logprobs in meta_info, non-streaming only
  sglang: { return_prompt_token_ids: true, return_meta_info: true, logprobs: true, top_logprobs: 0 },
  openai: {},
};

type Outcome = FetchOutcome;

export class OpenAICompatibleBackend implements Backend {
  readonly kind: Flavour;
  readonly tokenExact: boolean;
  readonly url: string;
  private readonly options: BackendOptions;
  private readonly requireIds: boolean;
  private readonly headers: Record<string, string>;
  private readonly contextLength: ContextLength;
  /** the model name requests ask for: --model, or the LoRA adapter polar loop published last (vLLM) */
  private served: string;

  constructor(kind: Flavour, options: BackendOptions) {
    if (!options.url) throw new Error(`--backend-url is required for --backend ${kind}`);
    this.kind = kind;
    this.url = trimSlash(options.url);
    this.options = options;
    this.tokenExact = kind !== 'openai';
    this.requireIds = options.requireTokenIds ?? kind !== 'openai';
    this.headers = authHeaders(options.apiKey);
    this.contextLength = new ContextLength(this.url, options.model, this.headers);
    this.served = options.model;
  }

  /** New requests ask for `name` (a LoRA adapter loaded at run time); requests already sent keep theirs. */
  serveModel(name: string): void {
    this.served = name;
  }

  private body(request: CanonicalRequest, stream: boolean, maxTokens?: number): Record<string, unknown> {
    return buildRequest(
      { ...request, model: this.served, ...(maxTokens !== undefined ? { maxTokens } : {}) },
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
  }

  /** Fits max_tokens to the context (vLLM: /v1/models + /tokenize); a fault when the prompt fills it. */
  private async fit(
    request: CanonicalRequest,
    context: CallContext,
  ): Promise<number | undefined | ProxyFault> {
    const asked = request.maxTokens ?? this.options.maxTokens;
    if (this.kind !== 'vllm' || asked === undefined) return asked;
    const body = this.body(request, false);
    const fitted = await fitMaxTokens({
      asked,
      request,
      maxModelLen: () => this.contextLength.get(),
      countPrompt: () =>
        tokenizeChat(
          this.url,
          {
            model: this.options.model,
            messages: body.messages,
            ...(body.tools ? { tools: body.tools } : {}),
            ...(body.chat_template_kwargs ? { chat_template_kwargs: body.chat_template_kwargs } : {}),
          },
          { headers: this.headers, signal: context.signal },
        ),
    });
    if ('fault' in fitted) return fitted.fault;
    if (fitted.fit) context.recorder.annotate('max_tokens_fit', fitted.fit);
    return fitted.maxTokens;
  }

  private async post(
    request: CanonicalRequest,
    context: CallContext,
    deadline: CallDeadline,
    stream: boolean,
    maxTokens?: number,
  ) {
    const body = this.body(request, stream, maxTokens);
    const url = `${this.url}/chat/completions`;
    // messages and tools are a pure function of canonical_request (buildRequest); recording them again
    // would triple the size of every call record, so the record points at them instead
    context.recorder.backendRequest(url, {
      ...body,
      messages: '<canonical_request.messages>',
      tools: body.tools ? '<canonical_request.tools>' : undefined,
    });
    return postJson(url, body, { deadline, headers: this.headers });
  }

  async *generate(request: CanonicalRequest, context: CallContext): AsyncGenerator<StreamEvent> {
    const deadline = new CallDeadline(context.signal, this.options);
    try {
      const started = await this.start(request, context, deadline);
      if (!started.ok) {
        yield { type: 'error', error: started.fault };
        return;
      }
      const id = `resp_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
      const type = started.response.headers.get('content-type') ?? '';
      // (the events come from fromStream through this generator alone: each level of delegation costs
      // every event turns of the microtask queue, and a call streams an event per token)
      yield* started.stream && type.includes('text/event-stream')
        ? this.fromStream(started.response, id, context, request, deadline)
        : this.fromCompletion(started.response, id, context, request, deadline);
    } finally {
      deadline.dispose();
    }
  }

  /** Fits max_tokens and sends the request (once more, refitted, after a context-length 400). */
  private async start(
    request: CanonicalRequest,
    context: CallContext,
    deadline: CallDeadline,
  ): Promise<{ ok: true; response: BackendResponse; stream: boolean } | { ok: false; fault: ProxyFault }> {
    const stream = this.kind !== 'sglang';
    const maxTokens = await this.fit(request, context);
    if (typeof maxTokens === 'object') return { ok: false, fault: maxTokens };
    let outcome: Outcome = await this.post(request, context, deadline, stream, maxTokens);
    // a server whose context this backend could not measure says so in its 400: fit once from that
    const retry = outcome.ok ? null : retryAfterContextFault(outcome.fault, maxTokens);
    if (retry) {
      context.recorder.annotate('max_tokens_fit', retry);
      outcome = await this.post(request, context, deadline, stream, retry.sent);
    }
    return outcome.ok ? { ok: true, response: outcome.response, stream } : outcome;
  }

  private async *fromStream(
    response: BackendResponse,
    id: string,
    context: CallContext,
    request: CanonicalRequest,
    deadline: CallDeadline,
  ): AsyncGenerator<StreamEvent> {
    const url = `${this.url}/chat/completions`;
    const parser = new ChatStreamParser(id, request.model);
    let first = true;
    let usageCompletion: number | null = null;
    const events = sseEvents(response);
    let readOn = false;
    try {
      for (let next = await events.next(); !next.done; next = await events.next()) {
        const event = next.value;
        if (event.data === '[DONE]') {
          // the stream's last event: the answer is complete now, not once the body's end has been read
          // (vLLM's StreamingResponse sends that end as a write of its own after the last chunk:
          // vllm/entrypoints/openai/chat_completion/api_router.py, starlette/responses.py
          // StreamingResponse.stream_response). That end is read after it, under the call's limits: leaving
          // the body unread would cancel it, and the HTTP client would then close the keep-alive
          // connection instead of reusing it.
          deadline.outlive(readToEnd(events, url));
          readOn = true;
          break;
        }
        let chunk: StreamChunk;
        try {
          chunk = parseWithPromptIds(event.data) as StreamChunk;
        } catch {
          context.recorder.warn(`backend sent a non-JSON SSE data line: ${event.data.slice(0, 200)}`);
          continue;
        }
        if (chunk.error) {
          const detail = errorDetail(JSON.stringify(chunk));
          yield { type: 'error', error: fault('backend_error', `backend stream error: ${detail}`) };
          return;
        }
        if (first) {
          first = false;
          if (this.requireIds && !chunk.prompt_token_ids) {
            yield { type: 'error', error: this.noIds('prompt_token_ids missing from the first chunk') };
            return;
          }
        }
        if (chunk.choices?.some((c) => c.finish_reason === 'abort')) {
          yield { type: 'error', error: abortFault(url) };
          return;
        }
        if (typeof chunk.usage?.completion_tokens === 'number')
          usageCompletion = chunk.usage.completion_tokens;
        for (const event of parser.push(chunk)) yield event;
      }
    } catch (error) {
      yield { type: 'error', error: transportFault(url, error, deadline) };
      return;
    } finally {
      // a call that ends before [DONE] (a fault, the harness leaving) cancels the rest of the body
      if (!readOn) await events.return(undefined).catch(() => undefined);
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
    const problem = this.checkTokens(
      done.tokens,
      { usageCompletion, streamed: true, tools: request.tools.length > 0 },
      context,
    );
    if (problem) {
      yield { type: 'error', error: problem };
      return;
    }
    for (const event of done.events) yield event;
  }

  private async *fromCompletion(
    response: BackendResponse,
    id: string,
    context: CallContext,
    request: CanonicalRequest,
    deadline: CallDeadline,
  ): AsyncGenerator<StreamEvent> {
    const url = `${this.url}/chat/completions`;
    const text = await response.text().catch(() => '');
    let raw: unknown;
    try {
      raw = parseWithPromptIds(text);
    } catch {
      const what = errorDetail(text);
      yield {
        type: 'error',
        error: deadline.timedOut
          ? deadline.fault(url)
          : fault('backend_error', `${url} answered ${what}, not a chat completion`),
      };
      return;
    }
    const choice = (raw as { choices?: { finish_reason?: unknown }[] })?.choices?.[0];
    if (choice?.finish_reason === 'abort') {
      yield { type: 'error', error: abortFault(url) };
      return;
    }
    const done = completionToEvents(raw, id, this.options.model);
    if (!done) {
      const what = errorDetail(text);
      yield {
        type: 'error',
        error: deadline.timedOut
          ? deadline.fault(url)
          : fault('backend_error', `${url} answered ${what}, not a chat completion`),
      };
      return;
    }
    const usage = (raw as { usage?: { completion_tokens?: unknown } }).usage?.completion_tokens;
    const check = {
      usageCompletion: typeof usage === 'number' ? usage : null,
      streamed: false,
      tools: request.tools.length > 0,
    };
    const problem = this.checkTokens(done.tokens, check, context);
    if (problem) {
      yield { type: 'error', error: problem };
      return;
    }
    // SGLang says which weights sampled the answer (its metadata); vLLM's chat answers do not
    const versions = reportedWeightVersions(raw);
    if (versions) context.recorder.weightVersions?.(versions);
    for (const event of done.events) yield event;
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
    check: Omit<IdsCheck, 'server' | 'ids'>,
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
    const inexact = checkCompletionIds(
      { ...check, server: this.kind, ids: tokens.completionTokenIds },
      context.recorder,
    );
    context.recorder.tokens({ ...tokens, completionLogprobs: logprobs, ...(inexact ? { inexact } : {}) });
    return null;
  }

  async countTokens(
    request: CanonicalRequest,
    context: CallContext,
  ): Promise<{ tokens: number; exact: boolean }> {
    if (this.kind === 'vllm') {
      const body = this.body(request, false);
      const count = await tokenizeChat(
        this.url,
        { model: this.options.model, messages: body.messages, ...(body.tools ? { tools: body.tools } : {}) },
        { headers: this.headers, signal: context.signal },
      );
      if (count !== null) return { tokens: count, exact: true };
    }
    return { tokens: estimateTokens(request), exact: false };
  }

  async close(): Promise<void> {}
}

interface StreamChunk {
  error?: unknown;
  prompt_token_ids?: unknown;
  usage?: { completion_tokens?: unknown } | null;
  choices?: { finish_reason?: unknown }[];
}

/**
 * Reads what follows a stream's [DONE] to the body's end (nothing, from a server that keeps to the
 * protocol: events after it are not part of the answer). A failure here (a limit, the connection) has
 * no call left to fail: the connection is then simply not reused.
 */
async function readToEnd(events: AsyncGenerator<unknown>, url: string): Promise<void> {
  try {
    while (!(await events.next()).done);
  } catch (error) {
    log.debug(`backend ${url}: reading the end of a finished stream: ${(error as Error)?.message ?? error}`);
  }
}

/** About 4 characters a token: used only when the server cannot count. */
export function estimateTokens(request: CanonicalRequest): number {
  const text = JSON.stringify(request.messages) + JSON.stringify(request.tools);
  return Math.ceil(text.length / 4);
}
