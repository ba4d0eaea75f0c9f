/**
 * A tiny stand-in for vLLM /v1/completions (streamed, token ids in the prompt, return_token_ids)
 * and SGLang /generate (input_ids, return_logprob), on 127.0.0.1. It answers scripted completions
 * (given as token ids) and keeps every request body it got.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StandIn {
  url: string;
  requests: Record<string, unknown>[];
  paths: string[];
  /** start the script from its first completion again */
  reset(): void;
  close(): Promise<void>;
}

export async function startStandIn(
  script: number[][],
  options: { finish?: 'stop' | 'length' } = {},
): Promise<StandIn> {
  const requests: Record<string, unknown>[] = [];
  const paths: string[] = [];
  let call = 0;
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => {
      raw += c;
    });
    req.on('end', () => {
      const body = JSON.parse(raw) as Record<string, unknown>;
      requests.push(body);
      paths.push(req.url ?? '');
      const ids = script[call++ % script.length]!;
      const logprobs = ids.map((_, i) => -0.25 - i / 1000);
      if (req.url === '/v1/completions') {
        const prompt = body.prompt;
        if (!Array.isArray(prompt) || !prompt.every(Number.isInteger) || body.return_token_ids !== true) {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({ error: { message: 'prompt must be token ids and return_token_ids true' } }),
          );
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const half = Math.ceil(ids.length / 2);
        const parts = [ids.slice(0, half), ids.slice(half)];
        parts.forEach((part, i) => {
          const choice = {
            index: 0,
            text: 'x',
            token_ids: part,
            logprobs: { token_logprobs: logprobs.slice(i * half, i * half + part.length), tokens: [] },
            finish_reason: i === 1 ? (options.finish ?? 'stop') : null,
          };
          const chunk = {
            id: 'cmpl-1',
            object: 'text_completion',
            choices: [choice],
            ...(i === 0 ? { prompt_token_ids: prompt } : {}),
          };
          res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        });
        res.end('data: [DONE]\n\n');
      } else if (req.url === '/generate') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            text: 'x',
            meta_info: {
              output_token_logprobs: ids.map((id, i) => [logprobs[i], id, null]),
              finish_reason: { type: options.finish ?? 'stop' },
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
    reset: () => {
      call = 0;
    },
    close: () => new Promise((r) => server.close(() => r())),
  };
}
