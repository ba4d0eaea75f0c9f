/**
 * A stand-in for vLLM's `/v1/completions` (streamed, prompt given as token ids, `return_token_ids`) and
 * SGLang's `/generate` (`input_ids`, `return_logprob`), on 127.0.0.1, with the real Qwen3 tokenizer.
 *
 * vLLM's token-id contract as the stand-in honours it (>= 0.10.2, vllm/entrypoints/openai/completion/
 * serving.py and protocol.py): `prompt` must be a list of token ids (each in the vocabulary) and
 * `return_token_ids: true`; every streamed chunk's choice carries its `token_ids` and `text`, the first
 * chunk's choice `prompt_token_ids` as well (per choice, not top level); with `logprobs: N` each chunk's
 * `logprobs.token_logprobs` has one value per token. Stop ids end the completion and are part of
 * `token_ids`, as vLLM does with `skip_special_tokens: false`. `GET /v1/models` states `max_model_len`;
 * prompt + max_tokens over it is a 400 in vLLM's nested error form.
 *
 * SGLang's `/generate` (python/sglang/srt/managers/io_struct.py GenerateReqInput, the HTTP server's
 * generate handler, tokenizer_manager._validate_one_request): `input_ids`, `sampling_params` (with
 * `sampling_seed` inside), `return_logprob`; the answer `{text, output_ids, meta_info}` with
 * `meta_info.output_token_logprobs` as `[logprob, id, null]` triples and `finish_reason` an object
 * `{type: stop|length|abort, matched|length|message}`; a prompt over the context is a 400
 * `{"error": {"message": "The input (N tokens) is longer than the model's context length (M tokens)."}}`.
 *
 * What it samples is either a fixed script of id lists (one per call, cycling) or a policy: a function
 * of the decoded prompt text that returns the completion as text (reasoning, content and tool calls in
 * the model's own syntax), which is tokenized with the real tokenizer and ended with `<|im_end|>`.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { PreTrainedTokenizer } from '@huggingface/transformers';
import { IM_END, qwenTokenizer } from './qwen-tokenizer.ts';
import { fakeLogprob } from './vllm-standin.ts';

/** the completion text to sample for a prompt (decoded with special tokens kept) */
export type CompletionPolicy = (promptText: string, promptIds: number[]) => string;

export interface CompletionsCall {
  path: string;
  body: Record<string, unknown>;
  promptIds: number[];
  promptText: string;
  completionIds: number[];
  logprobs: number[];
}

export interface StandIn {
  url: string;
  requests: Record<string, unknown>[];
  paths: string[];
  /** every call it answered, in order (policy mode keeps decoded prompts too) */
  calls: CompletionsCall[];
  /** start the script from its first completion again */
  reset(): void;
  close(): Promise<void>;
}

export interface CompletionsStandInOptions {
  /** scripted completions, as token ids (cycled) */
  script?: number[][];
  /** or: what to sample for each prompt (wins over script) */
  policy?: CompletionPolicy;
  finish?: 'stop' | 'length' | 'abort';
  /** tokens per streamed chunk (default: two chunks per completion) */
  chunkTokens?: number;
  /** the served context (default 40960) */
  maxModelLen?: number;
}

/** Scripted logprobs (kept from the first version of this stand-in): -0.25, -0.251, ... */
function scriptedLogprobs(ids: number[]): number[] {
  return ids.map((_, i) => -0.25 - i / 1000);
}

export async function startCompletionsStandIn(options: CompletionsStandInOptions): Promise<StandIn> {
  const tok: PreTrainedTokenizer | null = options.policy ? await qwenTokenizer() : null;
  const vocabSize = tok ? vocabularySize(tok) : Number.POSITIVE_INFINITY;
  const requests: Record<string, unknown>[] = [];
  const paths: string[] = [];
  const calls: CompletionsCall[] = [];
  let call = 0;
  const sample = (promptIds: number[]): { ids: number[]; logprobs: number[]; promptText: string } => {
    if (options.policy && tok) {
      const promptText = tok.decode(promptIds, { skip_special_tokens: false });
      const text = options.policy(promptText, promptIds);
      const ids = [...tok.encode(text, { add_special_tokens: false }), IM_END];
      return { ids, logprobs: ids.map((id, i) => fakeLogprob(id, i)), promptText };
    }
    const script = options.script ?? [[IM_END]];
    const ids = script[call++ % script.length]!;
    return { ids, logprobs: scriptedLogprobs(ids), promptText: '' };
  };
  const decode = (ids: number[]) => (tok ? tok.decode(ids, { skip_special_tokens: false }) : 'x');
  const maxModelLen = options.maxModelLen ?? 40960;
  const badRequest = (res: import('node:http').ServerResponse, message: string) => {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message, type: 'BadRequestError', param: null, code: 400 } }));
  };
  const validIds = (ids: unknown): ids is number[] =>
    Array.isArray(ids) && ids.every((t) => Number.isInteger(t) && t >= 0 && t < vocabSize);

  const server: Server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          object: 'list',
          data: [{ id: 'standin', object: 'model', max_model_len: maxModelLen }],
        }),
      );
      return;
    }
    let raw = '';
    req.on('data', (c) => {
      raw += c;
    });
    req.on('end', () => {
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(raw) as Record<string, unknown>;
      } catch {
        return badRequest(res, 'body is not JSON');
      }
      requests.push(body);
      const path = req.url ?? '';
      paths.push(path);
      if (path === '/v1/completions') {
        const prompt = body.prompt;
        if (!validIds(prompt) || body.return_token_ids !== true) {
          return badRequest(res, 'prompt must be token ids in the vocabulary and return_token_ids true');
        }
        const asked = typeof body.max_tokens === 'number' ? body.max_tokens : 16;
        if (prompt.length + asked > maxModelLen) {
          return badRequest(
            res,
            `'max_tokens' or 'max_completion_tokens' is too large: ${asked}. This model's maximum context length is ${maxModelLen} tokens and your request has ${prompt.length} input tokens (${asked} > ${maxModelLen} - ${prompt.length}).`,
          );
        }
        const { ids, logprobs, promptText } = sample(prompt);
        calls.push({ path, body, promptIds: prompt, promptText, completionIds: ids, logprobs });
        const wantLogprobs = typeof body.logprobs === 'number' && body.logprobs >= 0;
        if (body.stream !== true) {
          // stream defaults to false: one CompletionResponse, ids and prompt ids per choice
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              id: `cmpl-${calls.length}`,
              object: 'text_completion',
              model: body.model,
              choices: [
                {
                  index: 0,
                  text: decode(ids),
                  token_ids: ids,
                  prompt_token_ids: prompt,
                  logprobs: wantLogprobs
                    ? { token_logprobs: logprobs, tokens: ids.map((t) => decode([t])) }
                    : null,
                  finish_reason: options.finish ?? 'stop',
                },
              ],
              usage: {
                prompt_tokens: prompt.length,
                completion_tokens: ids.length,
                total_tokens: prompt.length + ids.length,
              },
            }),
          );
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const step = options.chunkTokens ?? Math.max(1, Math.ceil(ids.length / 2));
        for (let i = 0; i < ids.length; i += step) {
          const part = ids.slice(i, i + step);
          const last = i + step >= ids.length;
          const choice = {
            index: 0,
            text: decode(part),
            token_ids: part,
            logprobs: wantLogprobs
              ? { token_logprobs: logprobs.slice(i, i + part.length), tokens: part.map((t) => decode([t])) }
              : null,
            finish_reason: last ? (options.finish ?? 'stop') : null,
          };
          const chunk = {
            id: `cmpl-${calls.length}`,
            object: 'text_completion',
            model: body.model,
            // vLLM puts prompt_token_ids on the first chunk's choice (CompletionResponseStreamChoice)
            choices: [i === 0 ? { ...choice, prompt_token_ids: prompt } : choice],
          };
          res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        }
        res.end('data: [DONE]\n\n');
      } else if (path === '/generate') {
        const prompt = body.input_ids;
        if (!validIds(prompt)) return badRequest(res, 'input_ids must be token ids in the vocabulary');
        const params = (body.sampling_params ?? {}) as Record<string, unknown>;
        const asked = typeof params.max_new_tokens === 'number' ? params.max_new_tokens : 128;
        if (prompt.length >= maxModelLen) {
          return badRequest(
            res,
            `The input (${prompt.length} tokens) is longer than the model's context length (${maxModelLen} tokens).`,
          );
        }
        if (prompt.length + asked >= maxModelLen) {
          return badRequest(
            res,
            `Requested token count exceeds the model's maximum context length of ${maxModelLen} tokens. You requested a total of ${prompt.length + asked} tokens: ${prompt.length} tokens from the input messages and ${asked} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`,
          );
        }
        const { ids, logprobs, promptText } = sample(prompt);
        calls.push({ path, body, promptIds: prompt, promptText, completionIds: ids, logprobs });
        const finishType = options.finish ?? 'stop';
        const finishReason =
          finishType === 'length'
            ? { type: 'length', length: ids.length }
            : finishType === 'abort'
              ? { type: 'abort', message: 'Abort before prefill' }
              : { type: 'stop', matched: ids.at(-1) };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            text: decode(ids),
            output_ids: ids,
            meta_info: {
              id: `gen-${calls.length}`,
              prompt_tokens: prompt.length,
              completion_tokens: ids.length,
              output_token_logprobs:
                body.return_logprob === true ? ids.map((id, i) => [logprobs[i], id, null]) : undefined,
              finish_reason: finishReason,
            },
          }),
        );
      } else {
        res.writeHead(404);
        res.end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    paths,
    calls,
    reset: () => {
      call = 0;
    },
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** The scripted form the unit tests use: `startStandIn([[ids...], ...])`. */
export function startStandIn(
  script: number[][],
  options: { finish?: 'stop' | 'length' | 'abort'; maxModelLen?: number } = {},
): Promise<StandIn> {
  return startCompletionsStandIn({ script, ...options });
}

function vocabularySize(tok: PreTrainedTokenizer): number {
  const model = (tok as unknown as { model?: { vocab?: unknown[]; tokens_to_ids?: Map<string, number> } })
    .model;
  let max = 0;
  for (const id of model?.tokens_to_ids?.values() ?? []) if (id > max) max = id;
  const added = (tok as unknown as { added_tokens?: { id: number }[] }).added_tokens ?? [];
  for (const t of added) if (t.id > max) max = t.id;
  return max > 0 ? max + 1 : Number.POSITIVE_INFINITY;
}
