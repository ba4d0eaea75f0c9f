/**
 * A stand-in judge: an OpenAI-compatible `POST /v1/chat/completions` on 127.0.0.1 whose answers the
 * test writes, counting every call. The reply is a non-streaming chat completion as vLLM's OpenAI server
 * returns it (vllm/entrypoints/openai/protocol.py at ec3b890c14b00f6670515d9df8d503b5270e95ca,
 * ChatCompletionResponse / ChatCompletionResponseChoice / UsageInfo: `{id: "chatcmpl-...", object:
 * "chat.completion", created, model, choices: [{index: 0, message: {role: "assistant", content},
 * logprobs: null, finish_reason: "stop"}], usage: {prompt_tokens, total_tokens, completion_tokens}}`),
 * the OpenAI API's shape; an error is its nested form `{"error": {"message", "type", "param", "code"}}`
 * with the HTTP status. The body must be JSON with `model` and a non-empty `messages` list, as vLLM
 * validates (a 400 otherwise).
 */
import type { IncomingMessage } from 'node:http';
import { listenLocal } from './listen.ts';

export interface JudgeRequest {
  model: string;
  messages: Array<{ role: string; content: string }>;
  [key: string]: unknown;
}

/** What the judge answers a call: the content, or an HTTP error. */
export type JudgeAnswer = string | { status: number; message: string };

export interface JudgeStandIn {
  /** the /v1 base */
  url: string;
  /** every request body, in order */
  requests: JudgeRequest[];
  /** calls answered */
  readonly calls: number;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** `answer` gets each request and its 0-based index among the calls. */
export async function startJudgeStandIn(
  answer: (request: JudgeRequest, index: number) => JudgeAnswer,
): Promise<JudgeStandIn> {
  const requests: JudgeRequest[] = [];
  const send = (res: import('node:http').ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const error = (message: string, status: number) => ({
    error: {
      message,
      type: status >= 500 ? 'InternalServerError' : 'BadRequestError',
      param: null,
      code: status,
    },
  });
  const server = await listenLocal(async (req, res) => {
    const text = await readBody(req);
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions')
      return send(res, 404, error(`no route ${req.method} ${req.url}`, 404));
    let body: JudgeRequest;
    try {
      body = JSON.parse(text) as JudgeRequest;
    } catch {
      return send(res, 400, error('the body is not JSON', 400));
    }
    if (typeof body.model !== 'string' || !Array.isArray(body.messages) || body.messages.length === 0)
      return send(res, 400, error('model and messages are required', 400));
    const index = requests.length;
    requests.push(body);
    const a = answer(body, index);
    if (typeof a !== 'string') return send(res, a.status, error(a.message, a.status));
    send(res, 200, {
      id: `chatcmpl-standin${index}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      choices: [
        { index: 0, message: { role: 'assistant', content: a }, logprobs: null, finish_reason: 'stop' },
      ],
      usage: { prompt_tokens: 10, total_tokens: 20, completion_tokens: 10 },
    });
  });
  return {
    url: `${server.origin}/v1`,
    requests,
    get calls() {
      return requests.length;
    },
    close: () => server.close(),
  };
}
