/**
 * The tokens backend's HTTP client (`npm run bench -- tokens-http`): HttpCompletions (src/backends/
 * token-generator.ts: POST /v1/completions with prompt ids, the vLLM stream parsed into token chunks)
 * against a bare node:http client that sends the same body and reads the same bytes without parsing,
 * on one keep-alive connection pool, in one run. The server is a constant-cost vLLM stand-in (a
 * 2,000-token prompt echoed back, 33 streamed tokens), in this process, so both sides pay for it alike.
 * Printed: wall and CPU time per call (sequential), calls/s at 64 concurrent, and polar/bare ratios.
 */
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpCompletions } from '../src/backends/token-generator.ts';
import type { CallRecorder } from '../src/backends/types.ts';

const PROMPT = Array.from({ length: 2000 }, (_, i) => (i * 7919) % 150000);
const TOKENS = 33;

function stream(): string {
  const event = (v: unknown) => `data: ${JSON.stringify(v)}\n\n`;
  const choice = (i: number, finish: string | null) => ({
    index: 0,
    text: `t${i}`,
    token_ids: [i === TOKENS - 1 ? 151645 : 1000 + i],
    logprobs: { token_logprobs: [-0.5], tokens: [`t${i}`] },
    finish_reason: finish,
  });
  const first = event({ id: 'c', object: 'text_completion', prompt_token_ids: PROMPT, choices: [] });
  const body = Array.from({ length: TOKENS }, (_, i) =>
    event({ id: 'c', object: 'text_completion', choices: [choice(i, i === TOKENS - 1 ? 'stop' : null)] }),
  );
  return `${first}${body.join('')}data: [DONE]\n\n`;
}

const noRecorder = { backendRequest() {}, backendResponse() {}, annotate() {} } as unknown as CallRecorder;
const params = { promptIds: PROMPT, maxTokens: 64, temperature: 1, topP: 1, stopTokenIds: [151645] };

async function viaPolar(gen: HttpCompletions): Promise<void> {
  const it = gen.generate(params, { signal: new AbortController().signal, recorder: noRecorder });
  let n = 0;
  for (;;) {
    const o = await it.next();
    if (o.done) break;
    n += o.value.ids.length;
  }
  if (n !== TOKENS) throw new Error(`HttpCompletions read ${n} tokens, expected ${TOKENS}`);
}

function viaBare(url: string, agent: Agent): Promise<void> {
  const payload = JSON.stringify({ model: 'm', prompt: PROMPT, max_tokens: 64, stream: true });
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
      (res) => {
        res.on('data', () => {});
        res.on('end', resolve);
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

interface Figures {
  ms: number;
  cpuMs: number;
  concurrentPerS: number;
}

async function measure(call: () => Promise<void>, calls: number): Promise<Figures> {
  for (let i = 0; i < 200; i++) await call(); // warm-up: JIT, connections
  const cpu0 = process.cpuUsage();
  let t0 = performance.now();
  for (let i = 0; i < calls; i++) await call();
  const ms = (performance.now() - t0) / calls;
  const cpu = process.cpuUsage(cpu0);
  t0 = performance.now();
  const each = Math.ceil(calls / 64);
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      for (let i = 0; i < each; i++) await call();
    }),
  );
  const concurrentPerS = (64 * each) / ((performance.now() - t0) / 1000);
  return { ms, cpuMs: (cpu.user + cpu.system) / 1000 / calls, concurrentPerS };
}

export async function benchTokensHttp(calls = 2000): Promise<void> {
  const body = stream();
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(body);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const agent = new Agent({ keepAlive: true });
  try {
    const gen = new HttpCompletions('vllm', base, 'm');
    // alternated, twice each, so that a noisy moment hits both sides
    const bare: Figures[] = [];
    const polar: Figures[] = [];
    for (let round = 0; round < 2; round++) {
      bare.push(await measure(() => viaBare(`${base}/v1/completions`, agent), calls));
      polar.push(await measure(() => viaPolar(gen), calls));
    }
    const best = (xs: Figures[]): Figures => ({
      ms: Math.min(...xs.map((x) => x.ms)),
      cpuMs: Math.min(...xs.map((x) => x.cpuMs)),
      concurrentPerS: Math.max(...xs.map((x) => x.concurrentPerS)),
    });
    const b = best(bare);
    const p = best(polar);
    console.log(`tokens-http: ${calls} calls, ${PROMPT.length}-token prompt, ${TOKENS} streamed tokens`);
    const row = (name: string, f: Figures) =>
      console.log(
        `  ${name.padEnd(16)} ${f.ms.toFixed(3)} ms/call   cpu ${f.cpuMs.toFixed(3)} ms/call   ${f.concurrentPerS.toFixed(0)} calls/s at 64`,
      );
    row('bare node:http', b);
    row('HttpCompletions', p);
    console.log(
      `  polar/bare: ${(p.ms / b.ms).toFixed(2)}x time, ${(p.cpuMs / b.cpuMs).toFixed(2)}x cpu, ${(p.concurrentPerS / b.concurrentPerS).toFixed(2)}x throughput`,
    );
  } finally {
    agent.destroy();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchTokensHttp();
