/**
 * A stand-in for NeMo RL's generation server, the OpenAI-compatible front NeMo RL puts on its vLLM
 * workers for NeMo Gym agents, transcribed from NVIDIA-NeMo/RL at commit 7ea279abfbeb (2026-08-22):
 * nemo_rl/models/generation/vllm/vllm_worker_async.py (`_setup_vllm_openai_api_server`), utils.py
 * (`attach_token_information_to_chat_response_choices`), openai_server_utils.py (`replace_prefix_tokens`).
 *
 * - Only two routes: `POST /v1/chat/completions` and `POST /tokenize` (anything else: FastAPI's 404
 *   `{"detail": "Not Found"}`; there is no /v1/models).
 * - The chat route asserts `top_k` unset or -1, `top_p` set, and (temperature, top_p) equal to the
 *   generation config's train (or validation) values: a failed assert is FastAPI's plain-text 500.
 * - Token information on non-streaming answers when `logprobs` is set (`return_tokens_as_token_ids`
 *   defaults to on there; without `top_logprobs` a 400): each `choices[].message` gets
 *   `prompt_token_ids`, `generation_token_ids`, `generation_log_probs` (floored at -9999).
 * - Prefix replacement: `required_prefix_token_ids` is the request's field, else `prompt_token_ids +
 *   generation_token_ids` of the last message carrying them (any role); the prompt is then the prefix
 *   ids up to (not including) their final EOS, followed by the template's rendering from its N-th EOS on,
 *   N being the EOS count of the template's rendering of the messages up to the last assistant message.
 * - max tokens clamped to max_model_len - prompt; a prompt that fills the context is a 400.
 * The stand-in does not stream (polar never streams to this server): a streaming request is a 501.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { listenLocal } from './listen.ts';
import { IM_END, qwenTokenizer } from './qwen-tokenizer.ts';
import {
  type ChatBody,
  echoPolicy,
  fakeLogprob,
  json,
  type Policy,
  pyJson,
  readJson,
  render,
} from './vllm-standin.ts';

export interface NemoRlCall {
  body: ChatBody;
  promptIds: number[];
  completionIds: number[];
  /** the prefix ids the request carried (null: the template rendered the whole prompt) */
  requiredPrefix: number[] | null;
  maxTokens: number | null;
}

export interface NemoRlStandin {
  url: string;
  calls: NemoRlCall[];
  /** every request, with its path and status, in order */
  requests: { path: string; status: number }[];
  close(): Promise<void>;
}

export interface NemoRlOptions {
  policy?: Policy;
  model?: string;
  /** generation config (policy.generation in NeMo RL's YAML): default 1.0 / 1.0 */
  temperature?: number;
  topP?: number;
  valTemperature?: number;
  valTopP?: number;
  maxModelLen?: number;
}

export async function startNemoRlStandin(options: NemoRlOptions = {}): Promise<NemoRlStandin> {
  const tok = await qwenTokenizer();
  const policy = options.policy ?? echoPolicy;
  const maxModelLen = options.maxModelLen ?? 40960;
  const train = { temperature: options.temperature ?? 1, topP: options.topP ?? 1 };
  const val = {
    temperature: options.valTemperature ?? train.temperature,
    topP: options.valTopP ?? train.topP,
  };
  const calls: NemoRlCall[] = [];
  const requests: { path: string; status: number }[] = [];
  const encode = (text: string) => tok.encode(text, { add_special_tokens: false });
  const badRequest = (res: ServerResponse, message: string, param: string | null = null) =>
    send(res, 400, { error: { message, type: 'BadRequestError', param, code: 400 } });
  let currentPath = '';
  const send = (res: ServerResponse, status: number, body: unknown) => {
    requests.push({ path: currentPath, status });
    json(res, status, body);
  };
  const assertionFailed = (res: ServerResponse) => {
    requests.push({ path: currentPath, status: 500 });
    res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
    res.end('Internal Server Error');
  };

  /** NeMoRLOpenAIChatRequestMixin.model_post_init: the last message carrying prompt_token_ids */
  const requiredPrefix = (body: ChatBody): number[] | null => {
    if (Array.isArray(body.required_prefix_token_ids)) return body.required_prefix_token_ids as number[];
    for (let i = body.messages.length - 1; i >= 0; i--) {
      const m = body.messages[i] as Record<string, unknown>;
      if ('prompt_token_ids' in m) {
        return [...(m.prompt_token_ids as number[]), ...((m.generation_token_ids as number[]) ?? [])];
      }
    }
    return null;
  };

  /** The prompt ids: the template's rendering, its prefix replaced by the required ids. */
  const promptIds = (body: ChatBody): { ids: number[]; prefix: number[] | null } => {
    const template = encode(render(tok, body));
    const prefix = requiredPrefix(body);
    if (!prefix || prefix.length === 0) return { ids: template, prefix: null };
    let last = -1;
    for (let i = body.messages.length - 1; i >= 0; i--) {
      if (body.messages[i]!.role === 'assistant') {
        last = i;
        break;
      }
    }
    const upTo = last < 0 ? body.messages : body.messages.slice(0, last + 1);
    const templatePrefix = encode(render(tok, { ...body, messages: upTo }, undefined, false));
    return { ids: replacePrefixTokens(prefix, templatePrefix, template), prefix };
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    currentPath = (req.url ?? '').split('?')[0]!;
    if (req.method !== 'POST' || (currentPath !== '/v1/chat/completions' && currentPath !== '/tokenize')) {
      return send(res, 404, { detail: 'Not Found' });
    }
    const body = await readJson(req);
    if (currentPath === '/tokenize') {
      const { ids } = promptIds(body);
      return send(res, 200, { count: ids.length, max_model_len: maxModelLen, tokens: ids, token_strs: null });
    }
    if (!(body.top_k === undefined || body.top_k === null || body.top_k === -1)) return assertionFailed(res);
    if (body.top_p === undefined || body.top_p === null) return assertionFailed(res);
    const isTrain = body.temperature === train.temperature && body.top_p === train.topP;
    const isVal = body.temperature === val.temperature && body.top_p === val.topP;
    if (!isTrain && !isVal) return assertionFailed(res);
    if (body.stream) {
      return send(res, 501, { detail: 'the NeMo RL stand-in does not transcribe streaming' });
    }
    const asked = (body.max_completion_tokens ?? body.max_tokens ?? null) as number | null;
    const rendered = encode(render(tok, body));
    if (rendered.length + 1 > maxModelLen) {
      return badRequest(
        res,
        `This model's maximum context length is ${maxModelLen} tokens. However, your request has ${rendered.length} input tokens. Please reduce the length of the input messages.`,
        'input_tokens',
      );
    }
    const { ids: prompt, prefix } = promptIds(body);
    let maxTokens = asked;
    if (asked !== null) {
      const remaining = maxModelLen - prompt.length;
      if (remaining <= 0) {
        return badRequest(
          res,
          `Prompt length (${prompt.length}) fills or exceeds max_model_len (${maxModelLen}). No room for output tokens.`,
        );
      }
      maxTokens = Math.min(asked, remaining);
    }
    const tokenInfo = body.logprobs === true && body.return_tokens_as_token_ids !== false;
    if (tokenInfo && (body.top_logprobs === undefined || body.top_logprobs === null)) {
      return badRequest(
        res,
        '`top_logprobs` must be set when requesting token information from the NeMo-RL chat endpoint.',
        'top_logprobs',
      );
    }
    const reply = policy(body);
    const reasoningText = reply.reasoning ? `<think>\n${reply.reasoning}\n</think>\n\n` : '';
    const content = reply.content ?? '';
    const toolText = (reply.toolCalls ?? [])
      .map((c) => `<tool_call>\n${pyJson({ name: c.name, arguments: c.arguments })}\n</tool_call>`)
      .join('\n');
    let completion = [
      ...encode(reasoningText + content + (toolText && content ? '\n' : '') + toolText),
      IM_END,
    ];
    let finish = reply.toolCalls?.length ? 'tool_calls' : 'stop';
    let toolCalls = (reply.toolCalls ?? []).map((c, i) => ({
      id: `chatcmpl-tool-${calls.length}-${i}`,
      type: 'function',
      function: { name: c.name, arguments: JSON.stringify(c.arguments) },
    }));
    let text = content;
    if (maxTokens !== null && completion.length > maxTokens) {
      completion = completion.slice(0, maxTokens);
      finish = 'length';
      toolCalls = [];
      text = tok.decode(completion, { skip_special_tokens: true });
    }
    const logprobs = completion.map((id, i) => Math.max(fakeLogprob(id, i), -9999));
    calls.push({ body, promptIds: prompt, completionIds: completion, requiredPrefix: prefix, maxTokens });
    const message: Record<string, unknown> = {
      role: 'assistant',
      content: text || null,
      ...(reply.reasoning && finish !== 'length' ? { reasoning: reply.reasoning } : {}),
      tool_calls: toolCalls,
    };
    if (tokenInfo) {
      message.prompt_token_ids = prompt;
      message.generation_token_ids = completion;
      message.generation_log_probs = logprobs;
    }
    return send(res, 200, {
      id: `chatcmpl-${calls.length}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      choices: [
        {
          index: 0,
          message,
          logprobs: body.logprobs
            ? {
                content: completion.map((id, i) => ({
                  token: `token_id:${id}`,
                  logprob: logprobs[i],
                  bytes: null,
                  top_logprobs: [],
                })),
              }
            : null,
          finish_reason: finish,
          stop_reason: null,
        },
      ],
      usage: {
        prompt_tokens: prompt.length,
        completion_tokens: completion.length,
        total_tokens: prompt.length + completion.length,
      },
    });
  }

  const server = await listenLocal(handle);
  return {
    url: `${server.origin}/v1`,
    calls,
    requests,
    close: server.close,
  };
}

/** openai_server_utils.replace_prefix_tokens, with Qwen3's EOS (<|im_end|>). */
export function replacePrefixTokens(model: number[], templatePrefix: number[], template: number[]): number[] {
  if (model.length === 0) return template;
  const cutEnd = model.at(-1) === IM_END ? model.length - 1 : model.length;
  const needed = templatePrefix.filter((t) => t === IM_END).length;
  let seen = 0;
  let start = -1;
  for (let i = 0; i < template.length; i++) {
    if (template[i] === IM_END && ++seen === needed) {
      start = i;
      break;
    }
  }
  if (start < 0) throw new Error(`EOS token #${needed} not found in template_token_ids (only ${seen})`);
  return [...model.slice(0, cutEnd), ...template.slice(start)];
}
