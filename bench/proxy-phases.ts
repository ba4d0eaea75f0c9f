/**
 * Where a proxied call's time goes: the median time (ms after the proxy parsed the request head) at
 * which each call reaches each phase, for the bare pass-through, the floor (bench/proxy-floor.ts) and polar,
 * calls alternated one by
 * one as in bench/proxy.ts (the same 100 KB streaming request, the same constant-cost backend). It
 * locates the gap `npm run bench -- proxy` measures (issue 25, part 7): before the backend request is
 * sent (reading, parsing, converting and serialising the request), in the backend, and while the
 * answer streams (parsing each event, writing it in the harness's API). The phases come from node:http's
 * diagnostics channels (bench/proxy-child.ts), which cost both proxies a little: read the differences,
 * not the totals, and take the headline figures from `npm run bench -- proxy`.
 *
 *   POLAR_BENCH_PROXY_N   calls per path (default 300)
 */
import { Agent } from 'node:http';
import { pathToFileURL } from 'node:url';
import { startFastBackend } from './fast-backend.ts';
import { startChild } from './proxy.ts';
import { BENCH_REQUEST, streamingCall } from './proxy-client.ts';

const PHASES = [
  'request body read',
  'backend request sent',
  'backend response head',
  'backend response end',
  'answer ended',
  'answer finished',
] as const;

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1] ?? Number.NaN;
};

export async function benchProxyPhases(): Promise<void> {
  const iterations = Number(process.env.POLAR_BENCH_PROXY_N ?? 300);
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  const backend = await startFastBackend();
  const key = 'polar-bench-key-0123456789';
  // (the children inherit it when they start; benchmarks after this one start theirs without)
  process.env.POLAR_BENCH_PHASES = '1';
  const children = await Promise.all([
    startChild('bare', backend.url, key),
    startChild('floor', backend.url, key),
    startChild('polar', backend.url, key),
  ])
    .then(([bare, floor, polar]) => ({ bare, floor, polar }))
    .finally(() => {
      delete process.env.POLAR_BENCH_PHASES;
    });
  try {
    const paths = {
      bare: { url: `${children.bare.url}/v1/chat/completions`, headers: {} },
      floor: { url: `${children.floor.url}/v1/chat/completions`, headers: {} },
      polar: {
        url: `${children.polar.url}/v1/chat/completions`,
        headers: { authorization: `Bearer ${key}` },
      },
    };
    const client: Record<string, number[]> = { bare: [], floor: [], polar: [] };
    for (let i = 0; i < 30 + iterations; i++) {
      if (i === 30) for (const child of Object.values(children)) await child.phases(); // warm-up dropped
      for (const [name, p] of Object.entries(paths)) {
        const r = await streamingCall(p.url, BENCH_REQUEST, p.headers, agent);
        if (!r.ok) throw new Error(`a ${name} call failed`);
        if (i >= 30) client[name]!.push(r.ms);
      }
    }
    const at = {
      bare: await children.bare.phases(),
      floor: await children.floor.phases(),
      polar: await children.polar.phases(),
    };
    console.log(
      `\n## proxy phases: ${(Buffer.byteLength(BENCH_REQUEST) / 1024).toFixed(0)} KB streaming chat call, ${iterations} calls per path alternated; median ms after the request head`,
    );
    console.log('| phase reached | bare | floor | polar | polar - bare | polar - floor |');
    console.log('|---|---|---|---|---|---|');
    const m = (path: keyof typeof at, phase: string) => (phase === '' ? 0 : median(at[path][phase] ?? []));
    const row = (title: string, b: number, f: number, p: number) =>
      console.log(
        `| ${title} | ${b.toFixed(3)} | ${f.toFixed(3)} | ${p.toFixed(3)} | ${(p - b).toFixed(3)} | ${(p - f).toFixed(3)} |`,
      );
    for (const phase of PHASES) row(phase, m('bare', phase), m('floor', phase), m('polar', phase));
    const spans = [
      ['before the backend: request head to backend request sent', '', 'backend request sent'],
      ['the backend: request sent to response head', 'backend request sent', 'backend response head'],
      ['streaming: backend response head to answer ended', 'backend response head', 'answer ended'],
    ] as const;
    for (const [title, from, to] of spans)
      row(
        `span, ${title}`,
        m('bare', to) - m('bare', from),
        m('floor', to) - m('floor', from),
        m('polar', to) - m('polar', from),
      );
    row(
      "the harness's whole call (client side)",
      median(client.bare!),
      median(client.floor!),
      median(client.polar!),
    );
    console.log(
      '(bare pipes the request body to the backend as it arrives: its "body read" and "request sent" nearly coincide; polar reads it whole first. polar ends the answer at [DONE] and reads the end of the backend body after it; "answer finished" is node\'s finish, which for polar follows the call record.)',
    );
  } finally {
    for (const child of Object.values(children)) child.kill();
    await backend.close();
    agent.destroy();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await benchProxyPhases();
