/**
 * The `floor` path of bench/proxy.ts: the least a proxy that records calls at the token level must do per
 * call, written as plainly as node:http allows, with none of polar's caches and none of its checks. It
 * reads the request body whole and JSON.parses it, JSON.stringifies the backend's request (the same body
 * with vLLM's token options, polar's own additions in src/backends/openai-compatible.ts), JSON.parses
 * every event of the answer and writes it on in the harness's form (one write per network read), and
 * appends one JSON line per call with the prompt's and the completion's token ids and log-probabilities
 * (written whole at once, as src/capture/writer.ts does). What it leaves out, polar does on top: the
 * canonical form, the harness's own API, token-exactness checks, deadlines, limits, the request body and
 * the deltas in the record.
 *
 * It is no product code and no stand-in for a server: it is the yardstick that tells how much of polar's
 * cost against a bare pass-through is the work itself (parsing and writing JSON in JavaScript on every
 * call) and how much is polar's.
 */
import { openSync, writeSync } from 'node:fs';
import { Agent, createServer, type IncomingMessage, request } from 'node:http';

interface Chunk {
  id?: string;
  prompt_token_ids?: number[];
  choices?: Array<{
    index: number;
    delta?: Record<string, unknown>;
    finish_reason?: string | null;
    token_ids?: number[];
    logprobs?: { content?: Array<{ logprob: number }> } | null;
  }>;
  usage?: unknown;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** Starts the floor proxy on 127.0.0.1 in front of `backendUrl` (ending in /v1), appending to `capture`. */
export async function startFloorProxy(backendUrl: string, capture: string): Promise<string> {
  const target = new URL(`${backendUrl}/chat/completions`);
  const agent = new Agent({ keepAlive: true });
  const fd = openSync(capture, 'a');
  const server = createServer(async (req, res) => {
    const body = JSON.parse((await readBody(req)).toString('utf8')) as Record<string, unknown>;
    const out = JSON.stringify({ ...body, logprobs: true, return_token_ids: true });
    const upstream = request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) },
      },
      (answer) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        let pending = '';
        let prompt: number[] | null = null;
        const ids: number[] = [];
        const logprobs: number[] = [];
        answer.setEncoding('utf8');
        answer.on('data', (text: string) => {
          pending += text;
          let from = 0;
          let written = '';
          for (let at = pending.indexOf('\n\n'); at >= 0; at = pending.indexOf('\n\n', from)) {
            const data = pending.slice(from + 'data: '.length, at);
            from = at + 2;
            if (data === '[DONE]') {
              written += 'data: [DONE]\n\n';
              continue;
            }
            const chunk = JSON.parse(data) as Chunk;
            if (chunk.prompt_token_ids) prompt = chunk.prompt_token_ids;
            const choice = chunk.choices?.[0];
            if (!choice) continue;
            for (const id of choice.token_ids ?? []) ids.push(id);
            for (const lp of choice.logprobs?.content ?? []) logprobs.push(lp.logprob);
            const event = {
              id: chunk.id,
              object: 'chat.completion.chunk',
              model: body.model,
              choices: [{ index: 0, delta: choice.delta, finish_reason: choice.finish_reason ?? null }],
            };
            written += `data: ${JSON.stringify(event)}\n\n`;
          }
          pending = pending.slice(from);
          if (written) res.write(written);
        });
        answer.on('end', () => {
          res.end();
          const record = {
            prompt_token_ids: prompt,
            completion_token_ids: ids,
            completion_logprobs: logprobs,
          };
          writeSync(fd, `${JSON.stringify(record)}\n`);
        });
      },
    );
    upstream.on('error', () => res.destroy());
    upstream.end(out);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}
