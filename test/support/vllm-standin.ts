/**
 * A stand-in for a vLLM OpenAI-compatible server, for tests and benchmarks: real HTTP on 127.0.0.1, the
 * real Qwen3 tokenizer and chat template, and vLLM's token-id contract (>= 0.10.2): with
 * `return_token_ids: true` the first streamed chunk carries `prompt_token_ids` and every choice delta its
 * `token_ids`; with `logprobs: true` each chunk's `logprobs.content` has one entry per token. Without the
 * flags, no ids come back, as with the real server. What it answers is decided by a policy function.
 *
 * Transcribed from vLLM's OpenAI server (vllm-project/vllm, vllm/entrypoints/openai/chat_completion/
 * serving.py and protocol.py, engine/protocol.py, models/protocol.py, serve/tokenize/; summarised with
 * versions in ../shared/reference/real-servers.md):
 * - reasoning comes back as `reasoning` (current vLLM; `reasoning_content` before the rename: option
 *   `reasoningField`), on the message and on deltas;
 * - errors are nested `{"error": {"message", "type", "param", "code"}}` (old servers: flat
 *   `{"object": "error", "message", ...}`, option `errorForm: 'flat'`);
 * - `GET /v1/models` lists `max_model_len`; `POST /tokenize` returns `{count, max_model_len, tokens}`;
 *   prompt + max_tokens over `max_model_len` is a 400 naming both numbers;
 * - with tools and `tool_choice` auto (the default when tools are present) a server started without
 *   `--enable-auto-tool-choice --tool-call-parser` answers 400 (option `toolParser: false`);
 * - `dropToolParserIds` reproduces vllm-project/vllm#27482 (0.10.2 until PR #29074): the chunks the
 *   tool parser swallows are never sent, so their `token_ids` and logprobs are missing while
 *   `usage.completion_tokens` stays the true count;
 * - `skipToolParser` is a server whose tool-call parser does not read the model's format (a Qwen3
 *   model served with `--tool-call-parser mistral`, whose start token is `[TOOL_CALLS]`): each of
 *   vLLM's parsers (vllm/entrypoints/openai/tool_parsers/*_tool_parser.py, extract_tool_calls) returns
 *   `ExtractedToolCallInformation(tools_called=False, tool_calls=[], content=model_output)` when its
 *   start token is not in the output, so the `<tool_call>` text comes back as `content`, `tool_calls`
 *   empty, finish_reason `stop` (streamed: as content deltas);
 * - `max_tokens` / `max_completion_tokens` shorter than the answer: the output is cut there, without
 *   the end-of-turn token, `finish_reason: "length"`, a half-written tool call left as content;
 * - `finish_reason: "abort"` for a cancelled request (fault `abort`);
 * - `--api-key`: every /v1 route answers 401 without `Authorization: Bearer <key>`.
 * - `runtimeLora` (`VLLM_ALLOW_RUNTIME_LORA_UPDATING=True` and `--enable-lora`): the routes of
 *   vllm/entrypoints/serve/lora/api_router.py (commit 27873cab) and the checks of
 *   vllm/entrypoints/openai/serving_models.py (commit 075e9ba8): `POST /v1/load_lora_adapter
 *   {lora_name, lora_path}` answers 200 with the text "Success: LoRA adapter '<name>' added
 *   successfully.", 400 InvalidUserInput when a field is empty or the name is already loaded, 404
 *   NotFoundError when the path holds no adapter ("No adapter found"); `POST /v1/unload_lora_adapter
 *   {lora_name}` answers 200 "Success: LoRA adapter '<name>' removed successfully." or 404 "The lora
 *   adapter '<name>' cannot be found."; unloading only takes the name off the served list, so a request
 *   already running on it finishes; `/v1/models` lists each adapter with `parent` the base model; a chat
 *   request naming neither the base nor a loaded adapter is a 404 "The model `<name>` does not exist."
 *   Without the variable the routes are not registered (404).
 * - `devMode` (`VLLM_SERVER_DEV_MODE=1`) with `weightTransfer` (`--weight-transfer-config`): the weight
 *   transfer control plane, pause/resume and the weight version label of test/support/vllm-weight-transfer.ts
 *   (transcribed there, with the sources); a streamed generation is frozen, aborted or waited for as the
 *   pause mode says. `GET /server_info?config_format=json` (dev mode: vllm/entrypoints/serve/instrumentator/
 *   server_info.py @09cb327) states `vllm_config.weight_transfer_config`; `GET /version` `{"version"}`
 *   (vllm/frontend/entrypoints/serve/instrumentator/basic.py @055e47c2); `GET /openapi.json` lists the
 *   routes (FastAPI's, unless --disable-fastapi-docs).
 */
import { existsSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { PreTrainedTokenizer } from '@huggingface/transformers';
import { qwenTokenizer } from './qwen-tokenizer.ts';
import { type Ticket, VllmEngine, type WeightTransferOptions } from './vllm-weight-transfer.ts';

export interface Reply {
  reasoning?: string;
  content?: string;
  toolCalls?: Array<{ name: string; arguments: Record<string, unknown> }>;
}

export type Policy = (body: ChatBody) => Reply;

export interface ChatBody {
  model: string;
  messages: Array<{
    role: string;
    content?: unknown;
    tool_calls?: unknown[];
    tool_call_id?: string;
    reasoning_content?: string;
    reasoning?: string;
  }>;
  tools?: Array<{
    type: string;
    function: { name: string; parameters?: { properties?: Record<string, unknown> } };
  }>;
  stream?: boolean;
  return_token_ids?: boolean;
  logprobs?: boolean;
  chat_template_kwargs?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface StandinCall {
  body: ChatBody;
  promptText: string;
  promptIds: number[];
  completionIds: number[];
  logprobs: number[];
  /** devMode: the weight version labels its tokens were sampled under, in order (filled as it streams) */
  weightVersions?: string[];
  /** devMode: the weights that sampled its first token (the model, or a checkpoint a disk update loaded) */
  weights?: string;
}

export interface Fault {
  status?: number;
  /** never answer (for timeout tests) */
  hang?: boolean;
  /** answer without token ids even when asked */
  noTokenIds?: boolean;
  /** close the connection before answering */
  reset?: boolean;
  /** stream a generation that ends with finish_reason "abort" */
  abort?: boolean;
  /** the error message of a `status` fault */
  message?: string;
  /** a slow generation: stream each chunk this many ms after the one before (a long answer, a busy server) */
  chunkDelayMs?: number;
  /**
   * end the body this many ms after `data: [DONE]` (Infinity: never). vLLM answers a streamed chat call
   * with Starlette's StreamingResponse (vllm/entrypoints/openai/chat_completion/api_router.py,
   * create_chat_completion), which sends the body's end as a message of its own after the last chunk
   * (encode/starlette starlette/responses.py @02aa6eb, StreamingResponse.stream_response): a separate
   * write, later than [DONE].
   */
  endAfterDoneMs?: number;
}

export interface StandinOptions {
  policy?: Policy;
  model?: string;
  chunkTokens?: number;
  chatTemplate?: string;
  /** the served model's context (default 40960, Qwen3-4B's) */
  maxModelLen?: number;
  /** started with --enable-auto-tool-choice --tool-call-parser hermes (default true) */
  toolParser?: boolean;
  /** a tool-call parser that does not match the model: `<tool_call>` text comes back as content */
  skipToolParser?: boolean;
  /** reproduce vLLM #27482: streamed tool-call chunks lose their token_ids and logprobs */
  dropToolParserIds?: boolean;
  /** the reasoning field of messages and deltas (default 'reasoning', current vLLM) */
  reasoningField?: 'reasoning' | 'reasoning_content';
  /** error bodies: nested (current vLLM, default) or flat (old vLLM) */
  errorForm?: 'nested' | 'flat';
  /** require this key on every /v1 route and /tokenize, as `vllm serve --api-key` does */
  apiKey?: string;
  /** list the model without max_model_len, as a gateway in front of vLLM (LiteLLM) does */
  hideMaxModelLen?: boolean;
  /** the address to listen on (default 127.0.0.1; the cluster tests: the test network's bridge) */
  host?: string;
  /** started with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True: the load/unload routes */
  runtimeLora?: boolean;
  /** VLLM_SERVER_DEV_MODE=1: pause/resume, the weight-transfer routes, /server_info */
  devMode?: boolean;
  /** --weight-transfer-config (with devMode; default: started without it) */
  weightTransfer?: WeightTransferOptions;
  /** --disable-fastapi-docs: no /openapi.json */
  noOpenapi?: boolean;
}

export interface Standin {
  url: string;
  calls: StandinCall[];
  /** faults to apply to the next requests, in order */
  faults: Fault[];
  /** runtimeLora: the adapters loaded now, name -> path */
  adapters: Map<string, string>;
  /** TCP connections accepted so far, those open now, and the responses sent to their end */
  connections: { accepted: number; open: number; responsesEnded: number };
  /** devMode: the engine's pause state, weight version label and the weight-transfer routes called */
  engine: VllmEngine | null;
  close(): Promise<void>;
}

const SHELL_TOOLS: Record<string, (cmd: string) => Record<string, unknown>> = {
  exec_command: (cmd) => ({ cmd }),
  Bash: (cmd) => ({ command: cmd, description: 'Run the command' }),
  bash: (cmd) => ({ command: cmd }),
  shell: (cmd) => ({ command: ['bash', '-lc', cmd] }),
  // Qwen Code's shell tool (ToolNames.SHELL in @qwen-code/qwen-code 0.24.4)
  run_shell_command: (cmd) => ({ command: cmd }),
};

function text(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (p as { text?: string }).text ?? '').join('');
  return '';
}

/**
 * The default policy: a user message containing `ECHO <word>` makes it call the harness's shell tool
 * with `echo <word>`; after a tool result it answers with the result's last non-empty line; otherwise a
 * plain answer. With thinking on it also "reasons".
 */
export const echoPolicy: Policy = (body) => {
  const last = body.messages.at(-1);
  const thinking = body.chat_template_kwargs?.enable_thinking !== false;
  const reasoning = thinking ? 'The user wants a short answer.' : undefined;
  if (last?.role === 'tool') {
    const lines = text(last.content)
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
    return { ...(reasoning ? { reasoning } : {}), content: `Done. Output: ${lines.at(-1) ?? ''}` };
  }
  const lastUser = [...body.messages].reverse().find((m) => m.role === 'user');
  const match = /ECHO (\w+)/.exec(text(lastUser?.content));
  if (match && body.tools?.length) {
    for (const [name, args] of Object.entries(SHELL_TOOLS)) {
      if (body.tools.some((t) => t.function?.name === name)) {
        return {
          ...(reasoning ? { reasoning } : {}),
          toolCalls: [{ name, arguments: args(`echo ${match[1]}`) }],
        };
      }
    }
  }
  return { ...(reasoning ? { reasoning } : {}), content: 'Hello from the stand-in.' };
};

function templateMessages(body: ChatBody): Record<string, unknown>[] {
  return body.messages.map((m) => {
    const out: Record<string, unknown> = { role: m.role, content: text(m.content) };
    const reasoning = m.reasoning_content ?? m.reasoning;
    if (reasoning) out.reasoning_content = reasoning;
    if (Array.isArray(m.tool_calls)) {
      // vLLM parses the JSON arguments back into a mapping before templating (the template tojson's it)
      out.tool_calls = m.tool_calls.map((c) => {
        const fn = (c as { function: { name: string; arguments: string } }).function;
        let args: unknown = fn.arguments;
        try {
          args = JSON.parse(fn.arguments);
        } catch {}
        return { type: 'function', function: { name: fn.name, arguments: args } };
      });
    }
    return out;
  });
}

/** Deterministic, valid logprob for a sampled token. */
export function fakeLogprob(id: number, position: number): number {
  return -((((id * 31 + position * 7) % 997) + 1) / 500);
}

export async function readJson(req: IncomingMessage): Promise<ChatBody> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatBody;
}

/** JSON as Jinja's `tojson` (Python's json.dumps) writes it: `{"a": 1, "b": [1, 2]}`. */
export function pyJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pyJson).join(', ')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}: ${pyJson(v)}`)
      .join(', ')}}`;
  }
  return JSON.stringify(value);
}

/**
 * A ChatML template that renders history exactly as a model samples it (no reasoning dropped, tool calls
 * in tojson form), so a session through it is append-only token for token: for tests of what a
 * well-behaved server gives. The real Qwen3 template (the default) is not, which is what the tokens
 * backend exists for.
 */
export const APPEND_ONLY_TEMPLATE = [
  "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content }}",
  "{%- if tools %}{{- '\\n\\n# Tools\\n<tools>' }}{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}{{- '\\n</tools>' }}{%- endif %}",
  "{{- '<|im_end|>\\n' }}",
  "{%- elif tools %}{{- '<|im_start|>system\\n# Tools\\n<tools>' }}{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}{{- '\\n</tools><|im_end|>\\n' }}{%- endif %}",
  '{%- for message in messages %}',
  "{%- if message.role == 'system' and loop.first %}",
  "{%- elif message.role == 'tool' %}{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}",
  "{%- elif message.role == 'assistant' %}{{- '<|im_start|>assistant\\n' + message.content }}",
  '{%- if message.tool_calls %}{%- for tc in message.tool_calls %}',
  "{%- if (loop.first and message.content) or (not loop.first) %}{{- '\\n' }}{%- endif %}",
  "{{- '<tool_call>\\n' }}{{- {'name': tc.function.name, 'arguments': tc.function.arguments} | tojson }}{{- '\\n</tool_call>' }}",
  '{%- endfor %}{%- endif %}',
  "{{- '<|im_end|>\\n' }}",
  "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}",
  '{%- endfor %}',
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
].join('');

export async function startStandin(options: StandinOptions = {}): Promise<Standin> {
  const tok = await qwenTokenizer();
  const policy = options.policy ?? echoPolicy;
  const calls: StandinCall[] = [];
  const faults: Fault[] = [];
  const served = options.model ?? 'Qwen/Qwen3-4B';
  const maxModelLen = options.maxModelLen ?? 40960;
  const reasoningField = options.reasoningField ?? 'reasoning';
  const adapters = new Map<string, string>();
  const engine = options.devMode ? new VllmEngine(options.weightTransfer ?? { backend: null }, served) : null;
  const error = (
    res: ServerResponse,
    status: number,
    message: string,
    type: string,
    param: string | null = null,
  ) =>
    json(
      res,
      status,
      options.errorForm === 'flat'
        ? { object: 'error', message, type, param, code: status }
        : { error: { message, type, param, code: status } },
    );
  const server = createServer((req, res) => {
    handle(req, res).catch((error) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: String(error), type: 'InternalServerError' } }));
    });
  });
  const sockets = new Set<import('node:net').Socket>();
  const connections = {
    accepted: 0,
    responsesEnded: 0,
    get open() {
      return sockets.size;
    },
  };
  server.on('connection', (s) => {
    sockets.add(s);
    connections.accepted++;
    s.on('close', () => sockets.delete(s));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.once('finish', () => connections.responsesEnded++);
    const [path = '', search = ''] = (req.url ?? '').split('?');
    // `vllm serve --api-key`: the /v1 routes check the bearer token (api_server.py AuthenticationMiddleware)
    if (options.apiKey && path !== '/health' && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      return json(res, 401, { error: 'Unauthorized' });
    }
    if (req.method === 'GET' && path === '/version')
      return json(res, 200, { version: options.weightTransfer?.version ?? '0.32.0' });
    if (req.method === 'GET' && path === '/openapi.json' && !options.noOpenapi) {
      const paths = ['/v1/models', '/v1/chat/completions', '/tokenize', '/version', '/health'];
      if (engine) paths.push('/server_info', ...engine.paths());
      return json(res, 200, {
        openapi: '3.1.0',
        info: { title: 'FastAPI' },
        paths: Object.fromEntries(
          paths.map((p) => {
            const modes = options.weightTransfer?.pauseModes !== false;
            const query = ['mode', 'wait_for_inflight_requests', 'clear_cache'].filter(
              (q) => modes || q !== 'mode',
            );
            return [
              p,
              p === '/pause' ? { post: { parameters: query.map((name) => ({ name, in: 'query' })) } } : {},
            ];
          }),
        ),
      });
    }
    if (engine && req.method === 'GET' && path === '/server_info') {
      const backend = options.weightTransfer?.backend ?? null;
      const config = {
        model_config: { model: served },
        weight_transfer_config: backend ? { backend } : null,
      };
      const asJson = new URLSearchParams(search).get('config_format') === 'json';
      return json(res, 200, {
        vllm_config: asJson
          ? config
          : `model=${served}, weight_transfer_config=${backend ? `WeightTransferConfig(backend='${backend}')` : 'None'}`,
        vllm_env: { VLLM_SERVER_DEV_MODE: '1' },
      });
    }
    if (engine && (await engine.route(req, res, path, new URLSearchParams(search)))) return;
    if (req.method === 'GET' && path === '/v1/models') {
      return json(res, 200, {
        object: 'list',
        data: [
          {
            id: served,
            object: 'model',
            owned_by: 'vllm',
            root: served,
            ...(options.hideMaxModelLen ? {} : { max_model_len: maxModelLen }),
          },
          ...[...adapters].map(([id, root]) => ({
            id,
            object: 'model',
            owned_by: 'vllm',
            root,
            parent: served,
          })),
        ],
      });
    }
    const body = await readJson(req);
    if (options.runtimeLora && req.method === 'POST' && path === '/v1/load_lora_adapter') {
      const { lora_name: name, lora_path: where } = body as { lora_name?: string; lora_path?: string };
      if (!name || !where)
        return error(res, 400, "Both 'lora_name' and 'lora_path' must be provided.", 'InvalidUserInput');
      if (adapters.has(name))
        return error(res, 400, `The lora adapter '${name}' has already been loaded.`, 'InvalidUserInput');
      if (!existsSync(join(where, 'adapter_config.json')))
        return error(res, 404, `Loading lora ${name} failed: No adapter found for ${where}`, 'NotFoundError');
      adapters.set(name, where);
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`Success: LoRA adapter '${name}' added successfully.`);
      return;
    }
    if (options.runtimeLora && req.method === 'POST' && path === '/v1/unload_lora_adapter') {
      const { lora_name: name } = body as { lora_name?: string };
      if (!name)
        return error(
          res,
          400,
          "either 'lora_name' and 'lora_int_id' needs to be provided.",
          'InvalidUserInput',
        );
      if (!adapters.has(name))
        return error(res, 404, `The lora adapter '${name}' cannot be found.`, 'NotFoundError');
      adapters.delete(name);
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`Success: LoRA adapter '${name}' removed successfully.`);
      return;
    }
    if (
      options.runtimeLora &&
      path === '/v1/chat/completions' &&
      body.model !== served &&
      !adapters.has(body.model)
    ) {
      return error(res, 404, `The model \`${body.model}\` does not exist.`, 'NotFoundError', 'model');
    }
    if (req.method === 'POST' && path === '/tokenize') {
      const prompt = render(tok, body);
      const ids = tok.encode(prompt, { add_special_tokens: false });
      return json(res, 200, { count: ids.length, tokens: ids, max_model_len: maxModelLen, token_strs: null });
    }
    if (req.method !== 'POST' || path !== '/v1/chat/completions') {
      return error(res, 404, `no route ${req.method} ${path}`, 'NotFoundError');
    }
    const fault = faults.shift();
    if (fault?.hang) return; // never answers
    if (fault?.reset) {
      req.socket.destroy();
      return;
    }
    if (fault?.status) {
      const type = fault.status < 500 ? 'BadRequestError' : 'InternalServerError';
      return error(res, fault.status, fault.message ?? `injected ${fault.status}`, type);
    }
    // tools with tool_choice auto (the default when tools are present) need the auto tool parser
    const choice = body.tool_choice ?? (body.tools?.length ? 'auto' : 'none');
    if (choice === 'auto' && options.toolParser === false) {
      return error(
        res,
        400,
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        'BadRequestError',
      );
    }
    const promptText = render(tok, body, options.chatTemplate);
    const promptIds = tok.encode(promptText, { add_special_tokens: false });
    const asked = (body.max_completion_tokens ?? body.max_tokens) as number | undefined;
    if (promptIds.length >= maxModelLen) {
      return error(
        res,
        400,
        `This model's maximum context length is ${maxModelLen} tokens. However, your request has ${promptIds.length} input tokens. Please reduce the length of the input messages.`,
        'BadRequestError',
        'input_tokens',
      );
    }
    if (asked !== undefined && promptIds.length + asked > maxModelLen) {
      return error(
        res,
        400,
        `'max_tokens' or 'max_completion_tokens' is too large: ${asked}. This model's maximum context length is ${maxModelLen} tokens and your request has ${promptIds.length} input tokens (${asked} > ${maxModelLen} - ${promptIds.length}).`,
        'BadRequestError',
        'max_tokens',
      );
    }
    const reply = policy(body);
    const reasoningText = reply.reasoning ? `<think>\n${reply.reasoning}\n</think>\n\n` : '';
    let reasoning = reply.reasoning;
    const said = reply.content ?? '';
    // the model writes tool calls the way the template renders them (Python-style tojson), as a
    // model trained on that template does
    const calls_ = (reply.toolCalls ?? []).map(
      (c) => `<tool_call>\n${pyJson({ name: c.name, arguments: c.arguments })}\n</tool_call>`,
    );
    const written = calls_.length ? (said ? '\n' : '') + calls_.join('\n') : '';
    // a parser that does not read the model's format: the calls stay in the content
    const unparsed = options.skipToolParser === true;
    let content = unparsed ? said + written : said;
    const toolText = unparsed ? '' : written;
    let reasoningIds = tok.encode(reasoningText, { add_special_tokens: false });
    let contentIds = tok.encode(content, { add_special_tokens: false });
    let toolIds = tok.encode(toolText, { add_special_tokens: false });
    let eot = [151645];
    // max_tokens reached before the model stopped: the engine ends the sequence there (no EOT) with
    // finish_reason "length" (vllm/v1/engine: FinishReason.LENGTH); a tool call cut in half is not one
    // the parser can read, so its text stays content, and serving.py's `finish_reason = "tool_calls" if
    // auto_tools_called else output.finish_reason` answers "length"
    const whole = reasoningIds.length + contentIds.length + toolIds.length + eot.length;
    const lengthStop = asked !== undefined && whole > asked;
    if (lengthStop) {
      const r = Math.min(reasoningIds.length, asked);
      const rest = [...contentIds, ...toolIds].slice(0, asked - r);
      reasoningIds = reasoningIds.slice(0, r);
      contentIds = rest;
      toolIds = [];
      eot = [];
      content = contentIds.length ? tok.decode(contentIds) : '';
      // a cut inside the thinking: what was written of it (the reasoning parser strips the tags)
      if (reasoning !== undefined) {
        reasoning = r
          ? tok
              .decode(reasoningIds)
              .replace(/^<think>\n?/, '')
              .replace(/\n?<\/think>\n*$/, '')
          : '';
      }
    }
    const completionIds = [...reasoningIds, ...contentIds, ...toolIds, ...eot];
    const logprobs = completionIds.map((id, i) => fakeLogprob(id, i));
    // dev mode: the request is scheduled once the engine is not paused (before anything is sent)
    const ticket = engine ? await engine.admit() : null;
    calls.push({
      body,
      promptText,
      promptIds,
      completionIds,
      logprobs,
      ...(ticket ? { weightVersions: ticket.versions, weights: ticket.weights } : {}),
    });
    const giveIds = body.return_token_ids === true && !fault?.noTokenIds;
    const giveLogprobs = body.logprobs === true;
    const finish = fault?.abort ? 'abort' : lengthStop ? 'length' : toolText ? 'tool_calls' : 'stop';
    const toolCalls = (unparsed || lengthStop ? [] : (reply.toolCalls ?? [])).map((c, i) => ({
      id: `chatcmpl-tool-${calls.length}-${i}`,
      type: 'function',
      function: { name: c.name, arguments: JSON.stringify(c.arguments) },
    }));
    const id = `chatcmpl-${calls.length}`;
    const usage = {
      prompt_tokens: promptIds.length,
      completion_tokens: completionIds.length,
      total_tokens: promptIds.length + completionIds.length,
    };
    const lp = (ids: number[], offset: number) =>
      giveLogprobs
        ? {
            logprobs: {
              content: ids.map((t, i) => ({
                token: tok.decode([t]),
                logprob: logprobs[offset + i]!,
                bytes: [],
                top_logprobs: [],
              })),
            },
          }
        : {};
    if (!body.stream) {
      if (ticket) engine!.finish(ticket);
      return json(res, 200, {
        id,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        ...(giveIds ? { prompt_token_ids: promptIds } : {}),
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: content || null,
              ...(reasoning ? { [reasoningField]: reasoning } : {}),
              tool_calls: toolCalls,
            },
            finish_reason: finish,
            ...(giveIds ? { token_ids: completionIds } : {}),
            ...lp(completionIds, 0),
          },
        ],
        usage,
      });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    // the events, written at once or (fault chunkDelayMs) one every chunkDelayMs, as a slow server does
    const events: string[] = [];
    const send = (obj: unknown) => events.push(`data: ${JSON.stringify(obj)}\n\n`);
    const chunk = (
      delta: Record<string, unknown>,
      ids: number[],
      offset: number,
      finishReason: string | null = null,
      extra: Record<string, unknown> = {},
    ) =>
      send({
        id,
        object: 'chat.completion.chunk',
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        ...extra,
        choices: [
          {
            index: 0,
            delta,
            finish_reason: finishReason,
            ...(giveIds ? { token_ids: ids } : {}),
            ...lp(ids, offset),
          },
        ],
      });
    chunk({ role: 'assistant', content: '' }, [], 0, null, giveIds ? { prompt_token_ids: promptIds } : {});
    let offset = 0;
    if (reasoningIds.length) {
      chunk({ [reasoningField]: reasoning }, reasoningIds, offset);
      offset += reasoningIds.length;
    }
    const step = options.chunkTokens ?? 1;
    for (let i = 0; i < contentIds.length; i += step) {
      const ids = contentIds.slice(i, i + step);
      // decode the text of the delta from the whole content so multi-byte characters stay whole
      const before = i === 0 ? '' : tok.decode(contentIds.slice(0, i));
      const upto = i + step >= contentIds.length ? content : tok.decode(contentIds.slice(0, i + step));
      chunk({ content: upto.slice(before.length) }, ids, offset);
      offset += ids.length;
    }
    if (toolCalls.length) {
      if (options.dropToolParserIds) {
        // vLLM #27482: the tool parser returns no delta for most tool-call tokens, and those chunks
        // (with their token_ids and logprobs) are never sent; only the chunk that completes the call is
        const kept = Math.min(3, toolIds.length);
        const skipped = toolIds.length - kept;
        chunk(
          { tool_calls: toolCalls.map((c, index) => ({ index, ...c })) },
          toolIds.slice(skipped),
          offset + skipped,
        );
      } else {
        chunk({ tool_calls: toolCalls.map((c, index) => ({ index, ...c })) }, toolIds, offset);
      }
      offset += toolIds.length;
    }
    chunk({}, eot, offset, finish);
    send({
      id,
      object: 'chat.completion.chunk',
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      choices: [],
      usage,
    });
    events.push('data: [DONE]\n\n');
    const delay = fault?.chunkDelayMs ?? 0;
    if (ticket) return streamThroughEngine(engine!, ticket, res, events, delay, { id, model: body.model });
    const endAfterDone = fault?.endAfterDoneMs;
    const end = () => {
      if (endAfterDone === undefined) res.end();
      else if (Number.isFinite(endAfterDone)) setTimeout(() => res.end(), endAfterDone);
    };
    if (delay <= 0 && endAfterDone === undefined) {
      res.end(events.join(''));
      return;
    }
    if (delay <= 0) {
      res.write(events.join(''));
      end();
      return;
    }
    const next = () => {
      if (res.destroyed) return;
      const event = events.shift();
      if (event === undefined) {
        end();
        return;
      }
      res.write(event);
      setTimeout(next, delay);
    };
    next();
  }

  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}/v1`,
    calls,
    faults,
    adapters,
    connections,
    engine,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * A stream under the dev-mode engine: each chunk waits while a `keep` pause holds it; an `abort` pause ends
 * it with a last chunk `finish_reason: "abort"` (the partial output stays sent), then `[DONE]`.
 */
async function streamThroughEngine(
  engine: VllmEngine,
  ticket: Ticket,
  res: ServerResponse,
  events: string[],
  delay: number,
  head: { id: string; model: string },
): Promise<void> {
  try {
    for (const event of events) {
      if (res.destroyed) return;
      if (!(await engine.step(ticket))) {
        const choice = { index: 0, delta: {}, finish_reason: 'abort', token_ids: [] };
        const last = {
          ...head,
          object: 'chat.completion.chunk',
          created: Math.floor(Date.now() / 1000),
          choices: [choice],
        };
        res.end(`data: ${JSON.stringify(last)}\n\ndata: [DONE]\n\n`);
        return;
      }
      res.write(event);
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));
    }
    res.end();
  } finally {
    engine.finish(ticket);
  }
}

/** The prompt text vLLM renders for a chat body (the real template unless another is given). */
export function render(
  tok: PreTrainedTokenizer,
  body: ChatBody,
  chatTemplate?: string,
  addGenerationPrompt = true,
): string {
  return tok.apply_chat_template(templateMessages(body) as never, {
    ...(chatTemplate ? { chat_template: chatTemplate } : {}),
    tools: body.tools as never,
    tokenize: false,
    add_generation_prompt: addGenerationPrompt,
    ...(body.chat_template_kwargs ?? {}),
  }) as string;
}

export function json(res: ServerResponse, status: number, body: unknown): void {
  const t = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(t) });
  res.end(t);
}
