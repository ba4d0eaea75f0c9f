/**
 * A constant-cost backend for benchmarks: answers /v1/chat/completions with a fixed vLLM-style stream
 * (prompt_token_ids in the first chunk, token_ids and logprobs per chunk, usage, [DONE]) without
 * tokenizing, so what a benchmark measures is the path in front of it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export async function startFastBackend(
  options: { chunks?: number; promptTokens?: number } = {},
): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const chunks = options.chunks ?? 32;
  const prompt = Array.from({ length: options.promptTokens ?? 2000 }, (_, i) => (i * 7919) % 150000);
  const first = `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', prompt_token_ids: prompt, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, token_ids: [] }] })}\n\n`;
  const body = Array.from(
    { length: chunks },
    (_, i) =>
      `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta: { content: `tok${i} ` }, token_ids: [1000 + i], logprobs: { content: [{ token: `tok${i} `, logprob: -0.5 }] } }] })}\n\n`,
  ).join('');
  const last =
    `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop', token_ids: [151645], logprobs: { content: [{ token: '', logprob: -0.1 }] } }] })}\n\n` +
    `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [], usage: { prompt_tokens: prompt.length, completion_tokens: chunks + 1 } })}\n\ndata: [DONE]\n\n`;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(first);
      res.write(body);
      res.end(last);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    server,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
