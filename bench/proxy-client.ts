/** The harness side of the proxy benchmarks (bench/proxy.ts, bench/proxy-inproc.ts): the request and the call. */
import { readdirSync, readFileSync } from 'node:fs';
import { type Agent, request } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A streaming Chat Completions request of about 100 KB (a system prompt and one long user turn). */
export const BENCH_REQUEST = JSON.stringify({
  model: 'm',
  stream: true,
  stream_options: { include_usage: true },
  messages: [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'x'.repeat(100 * 1024) },
  ],
});

const TOOLS = ['read_file', 'apply_patch', 'shell'].map((name) => ({
  type: 'function',
  function: {
    name,
    description: `${name.replace('_', ' ')}: the coding agent's ${name} tool, as a harness declares it`,
    parameters: {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'a path in the repository' },
        command: { type: 'array', items: { type: 'string' } },
        patch: { type: 'string', description: 'a unified diff' },
      },
      required: ['path'],
      additionalProperties: false,
    },
  },
}));

let conversation: { system: string; messages: unknown[]; files: string[] } | undefined;

/** this repository's own source files, in a fixed order: code with the quotes, backslashes and newlines JSON escapes */
function sourceFiles(): string[] {
  const root = fileURLToPath(new URL('../src/', import.meta.url));
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
      a.name.localeCompare(b.name),
    )) {
      if (entry.isDirectory()) walk(join(dir, entry.name));
      else if (entry.name.endsWith('.ts')) out.push(readFileSync(join(dir, entry.name), 'utf8'));
    }
  };
  walk(root);
  return out;
}

/**
 * An agent's turn of about 100 KB, the shape a coding harness sends: a system prompt, three tools, and a
 * conversation of tool calls and their results (source files: 20 of about 4.5 KB), then one more call and
 * result that is new with each turn, as each turn of an agent adds one.
 */
export function agentRequest(turn: number): string {
  if (conversation === undefined) {
    const files = sourceFiles();
    const messages: unknown[] = [];
    for (let k = 0; k < 20; k++) {
      const id = `call_${k}`;
      messages.push(
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id,
              type: 'function',
              function: { name: 'read_file', arguments: JSON.stringify({ path: `src/f${k}.ts` }) },
            },
          ],
        },
        { role: 'tool', tool_call_id: id, content: files[k % files.length]!.slice(0, 4500) },
      );
    }
    const system = `You are a coding agent working in a repository.\n${files.join('\n').slice(0, 4000)}`;
    conversation = { system, messages, files };
  }
  const { system, messages, files } = conversation;
  const fresh = `// turn ${turn}\n${files[(20 + turn) % files.length]!.slice(0, 2000)}`;
  return JSON.stringify({
    model: 'm',
    stream: true,
    stream_options: { include_usage: true },
    tools: TOOLS,
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: 'Fix the failing test in this repository.' },
      ...messages,
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_new', type: 'function', function: { name: 'read_file', arguments: '{"path":"x"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_new', content: fresh },
    ],
  });
}

/** POSTs the body and reads the stream to its end: whether it answered 200 and ended with [DONE], and how long it took. */
export function streamingCall(
  url: string,
  body: string,
  headers: Record<string, string>,
  agent: Agent,
): Promise<{ ok: boolean; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const u = new URL(url);
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          ...headers,
        },
      },
      (res) => {
        let tail = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          tail = (tail + d).slice(-64);
        });
        res.on('end', () =>
          resolve({ ok: res.statusCode === 200 && tail.includes('[DONE]'), ms: performance.now() - t0 }),
        );
      },
    );
    req.on('error', () => resolve({ ok: false, ms: performance.now() - t0 }));
    req.end(body);
  });
}
