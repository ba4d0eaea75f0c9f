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
 *   loader's own message is not transcribed).
 * - the other weight routes (the distributed update, the weight version, pause/continue) and what an
 *   update does to the requests in flight: test/support/sglang-weights.ts, with its sources; a chat
 *   completion carries `metadata: {weight_version, weight_versions}` (serving_chat.py @0c078e6f), and
 *   `meta_info` the same keys when asked for; `delayMs` keeps a request in flight that long (a slow
 *   generation), an aborted one answers `finish_reason: "abort"`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { listenLocal } from './listen.ts';
import { IM_END, qwenTokenizer } from './qwen-tokenizer.ts';
import { SglangEngine, type SglangWeightOptions } from './sglang-weights.ts';
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
  /** each generation takes this long (in flight meanwhile) */
  delayMs?: number;
  /** the distributed update's data plane, and an older server without version spans */
  weights?: SglangWeightOptions;
}

export interface SglangChatStandin {
  url: string;
  calls: { body: ChatBody; promptIds: number[]; completionIds: number[]; weightVersions: string[] }[];
  /** the bodies of /update_weights_from_disk, in order */
  updates: { model_path: string; weight_version: unknown }[];
  /** the weights served now: server_args.model_path and weight_version (SGLang's default "default") */
  state: { modelPath: string; weightVersion: string };
  /** the weight routes, the requests in flight and their versions */
  engine: SglangEngine;
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
  const engine = new SglangEngine(options.weights ?? {}, served);
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
        tp_size: 1,
        version: '0.5.15',
      });
    }
    if (req.method === 'GET' && path === '/openapi.json') return json(res, 200, engine.openapi());
    if (await engine.route(req, res, path ?? '')) return;
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
    const ticket = await engine.admit();
    if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
    const aborted = !(await engine.complete(ticket)) || options.abort;
    calls.push({ body, promptIds, completionIds, weightVersions: ticket.versions });
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
    const finish = aborted ? 'abort' : parsed ? 'tool_calls' : 'stop';
    const metadata = engine.metadata(ticket.versions, completionIds.length);
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
                  finish_reason: aborted
                    ? { type: 'abort', message: 'aborted' }
                    : { type: 'stop', matched: IM_END },
                  ...metadata,
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
      metadata,
    });
  }

  const server = await listenLocal(handle);
  return {
    url: `${server.origin}/v1`,
    calls,
    get updates() {
      return engine.log
        .filter((e) => e.path === '/update_weights_from_disk' && typeof e.body.model_path === 'string')
        .map((e) => ({
          model_path: e.body.model_path as string,
          weight_version: e.body.weight_version ?? null,
        }));
    },
    state: {
      get modelPath() {
        return engine.modelPath;
      },
      get weightVersion() {
        return engine.weightVersion;
      },
    },
    engine,
    close: server.close,
  };
}
