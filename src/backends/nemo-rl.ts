/**
 * `--backend nemo-rl`: NeMo RL's generation server, what NeMo Gym agents talk to while NeMo RL trains
 * (nemo_rl/models/generation/vllm/vllm_worker_async.py, NVIDIA-NeMo/RL, read 2026-08). It serves only
 * `POST /v1/chat/completions` and `POST /tokenize` (no /v1/models). Token facts come on non-streaming
 * responses, per `choices[].message`: `prompt_token_ids`, `generation_token_ids`, `generation_log_probs`
 * (utils.py attach_token_information_to_chat_response_choices), when the request sets `logprobs`
 * and `top_logprobs` (a 400 without it; `return_tokens_as_token_ids` defaults to on there).
 *
 * Contiguity is the server's: when a request's messages carry `prompt_token_ids` + `generation_token_ids`
 * (NeMo Gym's convention), the last such pair becomes `required_prefix_token_ids`, and the server
 * replaces the template's rendering up to the last assistant message with those exact ids
 * (`NeMoRLOpenAIChatRequestMixin`, openai_server_utils.replace_prefix_tokens). polar remembers each turn
 * it sampled and puts its ids on the harness's copy of that turn. The server asserts that temperature
 * and top_p equal its generation config and that top_k is unset, so polar always sends both (the
 * harness's, else --temperature / --top-p, else 1.0) and never top_k. It clamps max tokens to the context
 * itself, and answers 400 when the prompt fills it.
 */
import { randomUUID } from 'node:crypto';
import { trimSlash } from '../http/client.ts';
import { DEFAULTS } from '../options/defaults.ts';
import type { AssistantMessage, CanonicalRequest, StreamEvent, TokenData } from '../protocols/canonical.ts';
import { fault } from '../protocols/canonical.ts';
import { buildRequest, completionToEvents } from '../protocols/openai-chat/index.ts';
import { authHeaders, errorDetail, postJson } from './http.ts';
import { rootUrl, tokenizeChat } from './server-info.ts';
import { abortFault, checkCompletionIds } from './token-check.ts';
import type { Backend, BackendOptions, CallContext } from './types.ts';

/** One turn the server sampled in this session, with the ids it was sampled from. */
interface SampledTurn {
  callId: string;
  content: string;
  toolCallIds: string[];
  promptIds: number[];
  generationIds: number[];
}

const STATE_KEY = 'nemo-rl:turns';

export class NemoRlBackend implements Backend {
  readonly kind = 'nemo-rl';
  readonly tokenExact = true;
  readonly url: string;
  private readonly headers: Record<string, string>;

  constructor(private readonly options: BackendOptions) {
    if (!options.url) throw new Error('--backend-url is required for --backend nemo-rl');
    this.url = trimSlash(options.url);
    this.headers = authHeaders(options.apiKey);
  }

  private get timeoutMs(): number {
    return this.options.timeoutMs ?? DEFAULTS.backendTimeoutMs.value;
  }

  /** The request body: the harness's conversation, token-information flags, the prefix ids. */
  body(request: CanonicalRequest, context: CallContext, record = true): Record<string, unknown> {
    const body = buildRequest(
      { ...request, model: this.options.model },
      {
        stream: false,
        extra: {
          logprobs: true,
          top_logprobs: 0,
          return_tokens_as_token_ids: true,
          ...(this.options.chatTemplateKwargs
            ? { chat_template_kwargs: this.options.chatTemplateKwargs }
            : {}),
        },
        defaults: {
          temperature: this.options.temperature ?? 1,
          topP: this.options.topP ?? 1,
          ...(this.options.maxTokens !== undefined ? { maxTokens: this.options.maxTokens } : {}),
        },
      },
    );
    const prefix = this.attachPrefix(request, body.messages as Record<string, unknown>[], context, record);
    if (record) context.recorder.annotate('prefix', prefix);
    return body;
  }

  /**
   * Puts the sampled ids on the harness's copy of the last assistant turn. Only the last assistant
   * message counts: the server cuts the template's rendering at that message, so ids of an earlier turn
   * on their own would drop the turns between (replace_prefix_tokens counts EOS tokens up to the last
   * assistant message). A last turn polar did not sample leaves the prompt to the template.
   */
  private attachPrefix(
    request: CanonicalRequest,
    messages: Record<string, unknown>[],
    context: CallContext,
    record: boolean,
  ): Record<string, unknown> {
    let last = -1;
    for (let i = request.messages.length - 1; i >= 0; i--) {
      if (request.messages[i]!.role === 'assistant') {
        last = i;
        break;
      }
    }
    if (last < 0) return { mode: 'rendered', reason: 'no assistant turn yet' };
    const message = request.messages[last] as AssistantMessage;
    const found = findTurn(turnsOf(context), message);
    if (!found) {
      if (record)
        context.recorder.warn(
          'the last assistant turn was not sampled by polar in this session: the server re-renders it',
        );
      return { mode: 'rendered', reason: 'last assistant turn not sampled by polar in this session' };
    }
    const target = messages[last]!;
    target.prompt_token_ids = found.turn.promptIds;
    target.generation_token_ids = found.turn.generationIds;
    return {
      mode: 'prefix_ids',
      call: found.turn.callId,
      matched_by: found.by,
      tokens: found.turn.promptIds.length + found.turn.generationIds.length,
    };
  }

  async *generate(request: CanonicalRequest, context: CallContext): AsyncGenerator<StreamEvent> {
    const url = `${this.url}/chat/completions`;
    const body = this.body(request, context);
    context.recorder.backendRequest(url, {
      ...body,
      messages:
        '<canonical_request.messages, with prefix ids on the last assistant turn (backend_info.prefix)>',
      tools: body.tools ? '<canonical_request.tools>' : undefined,
    });
    const outcome = await postJson(url, body, {
      signal: context.signal,
      timeoutMs: this.timeoutMs,
      headers: this.headers,
    });
    if (!outcome.ok) {
      yield { type: 'error', error: outcome.fault };
      return;
    }
    const text = await outcome.response.text().catch(() => '');
    let raw: NemoRlCompletion;
    try {
      raw = JSON.parse(text) as NemoRlCompletion;
    } catch {
      yield {
        type: 'error',
        error: fault('backend_error', `${url} answered ${errorDetail(text)}, not a chat completion`),
      };
      return;
    }
    const choice = raw.choices?.[0];
    if (choice?.finish_reason === 'abort') {
      yield { type: 'error', error: abortFault(url) };
      return;
    }
    const id = `resp_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
    const done = completionToEvents(raw, id, this.options.model);
    const message = choice?.message;
    if (!done || !message) {
      yield {
        type: 'error',
        error: fault('backend_error', `${url} answered ${errorDetail(text)}, not a chat completion`),
      };
      return;
    }
    if (!Array.isArray(message.prompt_token_ids) || !Array.isArray(message.generation_token_ids)) {
      yield {
        type: 'error',
        error: fault(
          'backend_no_token_ids',
          `${url} returned no prompt_token_ids / generation_token_ids on choices[0].message: is it NeMo RL's generation server (vllm_worker_async.py) with logprobs on?`,
        ),
      };
      return;
    }
    const tokens: TokenData = {
      promptTokenIds: message.prompt_token_ids,
      completionTokenIds: message.generation_token_ids,
      completionLogprobs: Array.isArray(message.generation_log_probs) ? message.generation_log_probs : null,
    };
    if (
      tokens.completionLogprobs &&
      tokens.completionLogprobs.length !== message.generation_token_ids.length
    ) {
      context.recorder.warn(
        'generation_log_probs and generation_token_ids differ in length; logprobs dropped',
      );
      tokens.completionLogprobs = null;
    }
    const usage = raw.usage?.completion_tokens;
    const inexact = checkCompletionIds(
      {
        server: this.kind,
        ids: tokens.completionTokenIds,
        usageCompletion: typeof usage === 'number' ? usage : null,
        streamed: false,
        tools: request.tools.length > 0,
      },
      context.recorder,
    );
    context.recorder.tokens(inexact ? { ...tokens, inexact } : tokens);
    turnsOf(context).push({
      callId: context.callId,
      content: done.response.content,
      toolCallIds: done.response.toolCalls.map((c) => c.id),
      promptIds: message.prompt_token_ids,
      generationIds: message.generation_token_ids,
    });
    yield* done.events;
  }

  async countTokens(
    request: CanonicalRequest,
    context: CallContext,
  ): Promise<{ tokens: number; exact: boolean }> {
    const body = this.body(request, context, false);
    const count = await tokenizeChat(
      rootUrl(this.url),
      { model: this.options.model, messages: body.messages, ...(body.tools ? { tools: body.tools } : {}) },
      { headers: this.headers, signal: context.signal },
    );
    if (count !== null) return { tokens: count, exact: true };
    const text = JSON.stringify(request.messages) + JSON.stringify(request.tools);
    return { tokens: Math.ceil(text.length / 4), exact: false };
  }

  async close(): Promise<void> {}
}

function turnsOf(context: CallContext): SampledTurn[] {
  let turns = context.sessionState.get(STATE_KEY) as SampledTurn[] | undefined;
  if (!turns) {
    turns = [];
    context.sessionState.set(STATE_KEY, turns);
  }
  return turns;
}

/** The sampled turn a harness's assistant message is: by a tool call id, else by its text (latest first). */
export function findTurn(
  turns: SampledTurn[],
  message: AssistantMessage,
): { turn: SampledTurn; by: 'tool_call_id' | 'content' } | null {
  for (let i = turns.length - 1; i >= 0; i--) {
    const turn = turns[i]!;
    if (message.toolCalls.some((c) => turn.toolCallIds.includes(c.id))) return { turn, by: 'tool_call_id' };
  }
  const text = message.content.trim();
  if (!text || message.toolCalls.length > 0) return null;
  for (let i = turns.length - 1; i >= 0; i--) {
    const turn = turns[i]!;
    if (turn.toolCallIds.length === 0 && turn.content.trim() === text) return { turn, by: 'content' };
  }
  return null;
}

interface NemoRlCompletion {
  choices?: {
    finish_reason?: string | null;
    message?: {
      prompt_token_ids?: number[];
      generation_token_ids?: number[];
      generation_log_probs?: number[];
    };
  }[];
  usage?: { completion_tokens?: number };
}
