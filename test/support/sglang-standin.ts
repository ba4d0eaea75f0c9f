/**
 * A stand-in for SGLang's OpenAI chat endpoint, transcribed from sgl-project/sglang
 * (python/sglang/srt/entrypoints/openai/serving_chat.py, protocol.py, http_server.py;
 * tokenizer_manager._validate_one_request; ../shared/reference/real-servers.md, read against a late-2026
 * snapshot of the repository; the exact version was not recorded there):
 * - token ids only without streaming: `return_prompt_token_ids` / `return_meta_info` with `stream: true`
 *   is a 400; per choice `prompt_token_ids` and `meta_info.output_token_logprobs` ([logprob, id, null]);
 * - reasoning in `reasoning_content`; `finish_reason` a string here (`stop`, `length`, `tool_calls`,
 *   `abort`) with `matched_stop`;
 * - without `--tool-call-parser` tool calls stay plain text in `content` (option `toolCallParser: null`);
 * - errors flat: `{"object": "error", "message", "type": "BadRequestError", "param", "code"}`;
 *   prompt + max_tokens >= context_len is a 400 ("Requested token count exceeds ...");
 * - `GET /v1/models` states `max_model_len`; `GET /get_server_info` lists the server args;
 * - `POST /update_weights_from_disk` as http_server.py answers it at commit 0025436e (body
 *   UpdateWeightFromDiskReqInput of managers/io_struct.py: `model_path` required, `weight_version`
 *   optional): a body without `model_path` is FastAPI's validation error turned 400 by the server's
 *   handler (`{object: "error", message, type: "Bad Request", code: 400}`); a failed load is a 400
 *   `{success: false, message, num_paused_requests}`; a loaded one a 200 with `success: true`, and the
 *   server's weight version becomes `weight_version` when one is given ("Weight version updated to V."
 *   added to the message). The stand-in fails the load when `model_path` is not a directory (the real
 *   loader's own message is not transcribed); it holds no requests, so `num_paused_requests` is 0.
 */
import { existsSync, statSync } from 'node:fs';
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

export interface SglangChatOptions {
  policy?: Policy;
  model?: string;
  contextLen?: number;
  /** --tool-call-parser (default qwen25); null: none */
  toolCallParser?: string | null;
  /** --reasoning-parser (default qwen3); null: none */
  reasoningParser?: string | null;
  /** answer every generation with finish_reason abort */
  abort?: boolean;
}

export interface SglangChatStandin {
  url: string;
  calls: { body: ChatBody; promptIds: number[]; completionIds: number[] }[];
  /** the bodies of /update_weights_from_disk, in order */
  updates: { model_path: string; weight_version: unknown }[];
  /** the weights served now: server_args.model_path and weight_version (SGLang's default "default") */
  state: { modelPath: string; weightVersion: string };
  close(): Promise<void>;
}

export async function startSglangChatStandin(options: SglangChatOptions = {}): Promise<SglangChatStandin> {
  const tok = await qwenTokenizer();
  const policy = options.policy ?? echoPolicy;
  const served = options.model ?? 'Qwen/Qwen3-4B';
  const contextLen = options.contextLen ?? 40960;
  const toolParser = options.toolCallParser === undefined ? 'qwen25' : options.toolCallParser;
  const reasoningParser = options.reasoningParser === undefined ? 'qwen3' : options.reasoningParser;
  const calls: SglangChatStandin['calls'] = [];
  const updates: SglangChatStandin['updates'] = [];
  const state: SglangChatStandin['state'] = { modelPath: served, weightVersion: 'default' };
  const encode = (text: string) => tok.encode(text, { add_special_tokens: false });
  const error = (res: ServerResponse, message: string) =>
    json(res, 400, { object: 'error', message, type: 'BadRequestError', param: null, code: 400 });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/v1/models') {
      return json(res, 200, {
        object: 'list',
        data: [{ id: served, object: 'model', root: served, max_model_len: contextLen }],
      });
    }
    if (req.method === 'GET' && path === '/get_server_info') {
      return json(res, 200, {
        model_path: served,
        tool_call_parser: toolParser,
        reasoning_parser: reasoningParser,
        context_length: contextLen,
      });
    }
    if (req.method === 'POST' && path === '/update_weights_from_disk') {
      const body = (await readJson(req)) as unknown as { model_path?: unknown; weight_version?: unknown };
      if (typeof body.model_path !== 'string')
        return json(res, 400, {
          object: 'error',
          message: "[{'type': 'missing', 'loc': ('body', 'model_path'), 'msg': 'Field required'}]",
          type: 'Bad Request',
          param: null,
          code: 400,
        });
      updates.push({ model_path: body.model_path, weight_version: body.weight_version ?? null });
      if (!existsSync(body.model_path) || !statSync(body.model_path).isDirectory())
        return json(res, 400, {
          success: false,
          message: `Failed to update weights: ${body.model_path} is not a model directory. Rolling back to the old weights.`,
          num_paused_requests: 0,
        });
      state.modelPath = body.model_path;
      let message = 'Succeeded to update model weights.';
      if (body.weight_version !== undefined && body.weight_version !== null) {
        state.weightVersion = String(body.weight_version);
        message += ` Weight version updated to ${state.weightVersion}.`;
      }
      return json(res, 200, { success: true, message, num_paused_requests: 0 });
    }
    if (req.method !== 'POST' || path !== '/v1/chat/completions')
      return json(res, 404, { detail: 'Not Found' });
    const body = await readJson(req);
    if (body.stream && (body.return_prompt_token_ids || body.return_meta_info)) {
      return error(
        res,
        'return_prompt_token_ids is not supported with streaming. Please set stream=false when using return_prompt_token_ids=true.',
      );
    }
    const promptIds = encode(render(tok, body));
    const asked = (body.max_tokens as number | undefined) ?? 128;
    if (promptIds.length >= contextLen) {
      return error(
        res,
        `The input (${promptIds.length} tokens) is longer than the model's context length (${contextLen} tokens).`,
      );
    }
    if (promptIds.length + asked >= contextLen) {
      return error(
        res,
        `Requested token count exceeds the model's maximum context length of ${contextLen} tokens. You requested a total of ${promptIds.length + asked} tokens: ${promptIds.length} tokens from the input messages and ${asked} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`,
      );
    }
    const reply = policy(body);
    const reasoning = reply.reasoning ? `<think>\n${reply.reasoning}\n</think>\n\n` : '';
    const content = reply.content ?? '';
    const toolText = (reply.toolCalls ?? [])
      .map((c) => `<tool_call>\n${pyJson({ name: c.name, arguments: c.arguments })}\n</tool_call>`)
      .join('\n');
    const completionIds = [
      ...encode(reasoning + content + (toolText && content ? '\n' : '') + toolText),
      IM_END,
    ];
    calls.push({ body, promptIds, completionIds });
    const parsed = toolParser !== null && (reply.toolCalls?.length ?? 0) > 0;
    const message = {
      role: 'assistant',
      content: parsed ? content || null : (reasoningParser ? '' : reasoning) + content + toolText,
      reasoning_content: reasoningParser && reply.reasoning ? reply.reasoning : null,
      tool_calls: parsed
        ? reply.toolCalls!.map((c, i) => ({
            id: `call_${calls.length}_${i}`,
            index: i,
            type: 'function',
            function: { name: c.name, arguments: JSON.stringify(c.arguments) },
          }))
        : null,
    };
    const finish = options.abort ? 'abort' : parsed ? 'tool_calls' : 'stop';
    return json(res, 200, {
      id: `chatcmpl-${calls.length}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      choices: [
        {
          index: 0,
          message,
          logprobs: null,
          finish_reason: finish,
          matched_stop: finish === 'stop' || finish === 'tool_calls' ? IM_END : null,
          ...(body.return_prompt_token_ids ? { prompt_token_ids: promptIds } : {}),
          ...(body.return_meta_info
            ? {
                meta_info: {
                  id: `gen-${calls.length}`,
                  prompt_tokens: promptIds.length,
                  completion_tokens: completionIds.length,
                  output_token_logprobs: completionIds.map((id, i) => [fakeLogprob(id, i), id, null]),
                  finish_reason: options.abort
                    ? { type: 'abort', message: 'aborted' }
                    : { type: 'stop', matched: IM_END },
                },
              }
            : {}),
        },
      ],
      usage: {
        prompt_tokens: promptIds.length,
        completion_tokens: completionIds.length,
        total_tokens: promptIds.length + completionIds.length,
      },
    });
  }

  const server = await listenLocal(handle);
  return {
    url: `${server.origin}/v1`,
    calls,
    updates,
    state,
    close: server.close,
  };
}
