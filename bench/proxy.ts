/**
 * Proxy overhead and throughput. Four paths to the same backend, in one run:
 *   direct  : client -> backend
 *   bare    : client -> http-proxy (a plain pass-through) -> backend
 *   floor   : client -> the least a recording proxy must do (bench/proxy-floor.ts: parse the request and
 *             every event, write them on, append the token ids) -> backend; a yardstick, no product
 *   polar   : client -> polar's capture proxy (parse, convert, record to a capture file) -> backend
 * Latency is per call at p50/p99 for a streaming ~100 KB request; throughput at 1, 16 and 64
 * concurrent streaming sessions; CPU milliseconds per call of each proxy process (process.cpuUsage, which
 * a loaded machine disturbs far less than wall time). The paths alternate call by call (latency) and
 * round by round (throughput, best of the rounds), so load changes hit all of them alike.
 * Targets (issue 16): polar p50 within 1.5x of bare, p99 within 2x, zero errors, RSS < 300 MB. At 64
 * concurrent streams (issue 44): polar's CPU per call at most 1.2x the floor's and its throughput at least
 * the floor's. (Issue 16's ">= 0.5x bare at 64" is retired: on 2 cores the load generator and the backend
 * share the cores with the proxy, and the floor itself reaches about 0.3x bare there; bare's ratio is
 * still printed.)
 */
import { fork } from 'node:child_process';
import { Agent } from 'node:http';
import { fileURLToPath } from 'node:url';
import { startFastBackend } from './fast-backend.ts';
import { agentRequest, BENCH_REQUEST, streamingCall } from './proxy-client.ts';

const agent = new Agent({ keepAlive: true, maxSockets: 256 });
const call = (url: string, body: string, headers: Record<string, string>) =>
  streamingCall(url, body, headers, agent);

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

export type Child = {
  url: string;
  rss(): Promise<number>;
  cpu(): Promise<number>;
  /** each phase's times (ms after the request head) since the last ask: POLAR_BENCH_PHASES=1 only */
  phases(): Promise<Record<string, number[]>>;
  kill(): void;
};

export async function startChild(
  kind: 'polar' | 'bare' | 'floor',
  backendUrl: string,
  key: string,
): Promise<Child> {
  const child = fork(fileURLToPath(new URL('./proxy-child.ts', import.meta.url)), [kind, backendUrl, key], {
    execArgv: [
      '--import',
      'tsx',
      ...(process.env.POLAR_BENCH_PROF && kind === 'polar'
        ? ['--cpu-prof', '--cpu-prof-dir', process.env.POLAR_BENCH_PROF]
        : []),
    ],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`${kind} proxy exited with ${code}`)));
  });
  return {
    url,
    rss: () =>
      new Promise((resolve) => {
        child.once('message', (m) => resolve((m as { rss: number }).rss));
        child.send('rss');
      }),
    cpu: () =>
      new Promise((resolve) => {
        child.once('message', (m) => resolve((m as { cpu: number }).cpu));
        child.send('cpu');
      }),
    phases: () =>
      new Promise((resolve) => {
        child.once('message', (m) => resolve((m as { phases: Record<string, number[]> }).phases));
        child.send('phases');
      }),
    kill: () => child.kill('SIGINT'),
  };
}

export async function benchProxy(): Promise<void> {
  const iterations = Number(process.env.POLAR_BENCH_PROXY_N ?? 300);
  const backend = await startFastBackend();
  const key = 'polar-bench-key-0123456789';
  // each proxy runs in its own process, as in real use (the harness is another process)
  const bareChild = await startChild('bare', backend.url, key);
  const floorChild = await startChild('floor', backend.url, key);
  const polarChild = await startChild('polar', backend.url, key);
  const children: Record<string, Child | undefined> = {
    bare: bareChild,
    floor: floorChild,
    polar: polarChild,
  };

  const body = BENCH_REQUEST;
  const paths = {
    direct: { url: `${backend.url}/chat/completions`, headers: {} },
    bare: { url: `${bareChild.url}/v1/chat/completions`, headers: {} },
    floor: { url: `${floorChild.url}/v1/chat/completions`, headers: {} },
    polar: { url: `${polarChild.url}/v1/chat/completions`, headers: { authorization: `Bearer ${key}` } },
  } as const;
  const entries = Object.entries(paths);

  /** p50/p99 per path and each proxy's CPU per call, the paths alternated call by call */
  const latency = async (title: string, bodyOf: (i: number) => string) => {
    console.log(`\n## proxy: ${title}, ${iterations} calls per path, paths alternated call by call`);
    for (let i = 0; i < 30; i++) for (const [, p] of entries) await call(p.url, bodyOf(i), p.headers); // warm-up
    const ms: Record<string, number[]> = Object.fromEntries(entries.map(([n]) => [n, []]));
    const cpu0: Record<string, number> = {};
    for (const [name, child] of Object.entries(children)) cpu0[name] = await child!.cpu();
    for (let i = 0; i < iterations; i++) {
      // (the same body on every path: a turn's new content is new to each)
      const b = bodyOf(30 + i);
      for (const [name, p] of entries) ms[name]!.push((await call(p.url, b, p.headers)).ms);
    }
    const cpuPerCall: Record<string, number> = {};
    for (const [name, child] of Object.entries(children))
      cpuPerCall[name] = ((await child!.cpu()) - cpu0[name]!) / iterations;
    const lat: Record<string, { p50: number; p99: number }> = {};
    for (const [name] of entries) lat[name] = { p50: pct(ms[name]!, 50), p99: pct(ms[name]!, 99) };
    console.log('| path | p50 ms | p99 ms | p50 vs bare | p99 vs bare | proxy CPU ms/call |');
    console.log('|---|---|---|---|---|---|');
    for (const [name, l] of Object.entries(lat)) {
      const cpu = cpuPerCall[name]?.toFixed(2) ?? '-';
      console.log(
        `| ${name} | ${l.p50.toFixed(3)} | ${l.p99.toFixed(3)} | ${(l.p50 / lat.bare!.p50).toFixed(2)}x | ${(l.p99 / lat.bare!.p99).toFixed(2)}x | ${cpu} |`,
      );
    }
    const p50Ratio = lat.polar!.p50 / lat.bare!.p50;
    const p99Ratio = lat.polar!.p99 / lat.bare!.p99;
    console.log(
      `polar vs bare pass-through: p50 ${p50Ratio.toFixed(2)}x (target <= 1.5x: ${p50Ratio <= 1.5 ? 'met' : 'NOT met'}), p99 ${p99Ratio.toFixed(2)}x (target <= 2x: ${p99Ratio <= 2 ? 'met' : 'NOT met'}), CPU per call ${(cpuPerCall.polar! / cpuPerCall.bare!).toFixed(2)}x (floor: p50 ${(lat.floor!.p50 / lat.bare!.p50).toFixed(2)}x, CPU ${(cpuPerCall.floor! / cpuPerCall.bare!).toFixed(2)}x)`,
    );
  };
  await latency(
    `streaming chat call, ${(Buffer.byteLength(body) / 1024).toFixed(0)} KB request (one long user turn)`,
    () => body,
  );
  // (a harness's real turn: code with escapes in many messages, and something new every turn)
  await latency(
    `streaming chat call, an agent's turn of ${(Buffer.byteLength(agentRequest(0)) / 1024).toFixed(0)} KB (20 tool results of source code, one new per call)`,
    agentRequest,
  );

  const phasePeaks: Array<[string, number]> = [['sequential', await polarChild.rss()]];
  const rounds = Number(process.env.POLAR_BENCH_PROXY_ROUNDS ?? 2);
  console.log(
    `\n| concurrency | path | calls/s (best of ${rounds} alternated rounds) | errors | vs bare | proxy CPU ms/call |`,
  );
  console.log('|---|---|---|---|---|---|');
  for (const concurrency of [1, 16, 64]) {
    // (512 calls a round at 64 left bare's rate 1.7x apart between runs: 2,048 now)
    const total = Math.max(256, concurrency * 32);
    const rates: Record<string, number> = {};
    const errors: Record<string, number> = {};
    const cpuMs: Record<string, number> = {};
    for (let round = 0; round < rounds; round++) {
      for (const [name, p] of entries) {
        let next = 0;
        const c0 = await children[name]?.cpu();
        const t0 = performance.now();
        await Promise.all(
          Array.from({ length: concurrency }, async () => {
            while (next < total) {
              next++;
              if (!(await call(p.url, body, p.headers)).ok) errors[name] = (errors[name] ?? 0) + 1;
            }
          }),
        );
        rates[name] = Math.max(rates[name] ?? 0, total / ((performance.now() - t0) / 1000));
        const child = children[name];
        if (child && c0 !== undefined) cpuMs[name] = (cpuMs[name] ?? 0) + ((await child.cpu()) - c0) / total;
      }
    }
    for (const [name] of entries) {
      console.log(
        `| ${concurrency} | ${name} | ${rates[name]!.toFixed(0)} | ${errors[name] ?? 0} | ${(rates[name]! / rates.bare!).toFixed(2)}x | ${cpuMs[name] === undefined ? '-' : (cpuMs[name]! / rounds).toFixed(2)} |`,
      );
    }
    if (concurrency === 64) {
      const cpu = cpuMs.polar! / cpuMs.floor!;
      const rate = rates.polar! / rates.floor!;
      console.log(
        `polar at 64 concurrent vs the floor: CPU per call ${cpu.toFixed(2)}x (target <= 1.2x: ${cpu <= 1.2 ? 'met' : 'NOT met'}), throughput ${rate.toFixed(2)}x (target >= 1x: ${rate >= 1 ? 'met' : 'NOT met'}); vs bare: polar ${(rates.polar! / rates.bare!).toFixed(2)}x, floor ${(rates.floor! / rates.bare!).toFixed(2)}x`,
      );
    }
    phasePeaks.push([`${concurrency} concurrent`, await polarChild.rss()]);
  }
  const rss = Math.max(...phasePeaks.map(([, r]) => r));
  console.log(
    `\npolar proxy peak RSS by phase: ${phasePeaks.map(([p, r]) => `${p} ${(r / 1048576).toFixed(0)} MB`).join(', ')}`,
  );
  console.log(
    `\npeak RSS of the polar proxy process: ${(rss / 1048576).toFixed(0)} MB (target < 300 MB: ${rss < 300 * 1048576 ? 'met' : 'NOT met'})`,
  );
  for (const child of Object.values(children)) child!.kill();
  await backend.close();
  agent.destroy();
}

if (import.meta.url === `file://${process.argv[1]}`) await benchProxy();
