/**
 * Benchmark of `polar build`: throughput on a generated capture (many sessions, contexts growing to
 * 32k tokens, token-exact), against a baseline that only reads every line of the same file and
 * JSON.parses it, measured in the same run. Target (issue 25): build within 1.5x of the baseline, memory bounded by
 * the largest session (the build streams; it never holds the whole file).
 *
 *   POLAR_BENCH_BUILD_MB   capture size in MB (default 1024)
 *   POLAR_BENCH_BUILD_CTX  context length each session grows to, in tokens (default 32768)
 *
 * The capture is written to a temporary directory, deleted at the end.
 */
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { buildTrajectories } from '../src/trajectory/build.ts';
import { readLines } from '../src/util/jsonl.ts';
import { seededRandom } from '../src/util/random.ts';

const EOT = 151645;
const T = '2026-01-01T00:00:00.000Z';

interface Generated {
  bytes: number;
  sessions: number;
  calls: number;
  largestSessionBytes: number;
}

/** Writes sessions until the file reaches `targetBytes`. Each session: a root chain of tool turns up to
 * `ctx` tokens; every fourth session also has an interleaved subagent chain; then session_end, grading. */
async function generate(file: string, targetBytes: number, ctx: number): Promise<Generated> {
  const out = createWriteStream(file, { encoding: 'utf8', highWaterMark: 1 << 22 });
  const rand = seededRandom(42);
  const tokens = (n: number): number[] => {
    const a = new Array<number>(n);
    for (let i = 0; i < n; i++) a[i] = (rand() * 150000) | 0;
    return a;
  };
  let bytes = 0;
  let sessions = 0;
  let calls = 0;
  let largest = 0;
  const put = async (value: unknown): Promise<number> => {
    const line = `${JSON.stringify(value)}\n`;
    bytes += line.length;
    if (!out.write(line)) await once(out, 'drain');
    return line.length;
  };
  const callRecord = (sid: string, seq: number, prompt: number[], completion: number[], text: number) => ({
    v: 1,
    type: 'call',
    id: `${sid}-c${seq}`,
    session: sid,
    seq,
    api: 'openai-responses',
    harness: 'codex',
    stream: true,
    started_at: T,
    ended_at: T,
    timings: { ttfb_ms: 120, backend_ms: 900, total_ms: 950 },
    request: {
      method: 'POST',
      path: '/v1/responses',
      headers: { 'content-type': 'application/json' },
      // only the newest input item's text (real requests resend the whole history: this is conservative)
      body: { model: 'qwen3-4b', input: [{ role: 'user', content: 'x'.repeat(text) }] },
    },
    response: { status: 200, body: null },
    canonical_request: null,
    backend_request: null,
    prompt_token_ids: prompt,
    completion_token_ids: completion,
    completion_logprobs: completion.map(() => -rand()),
    finish_reason: 'stop',
    usage: { prompt_tokens: prompt.length, completion_tokens: completion.length },
    token_exact: true,
    warnings: [],
    harness_meta: { request_kind: 'turn' },
    error: null,
  });

  while (bytes < targetBytes) {
    const sid = `bench-${sessions}`;
    let sessionBytes = 0;
    sessionBytes += await put({
      v: 1,
      type: 'session',
      id: sid,
      harness: 'codex',
      argv: ['codex', 'exec'],
      cwd: '/work',
      started_at: T,
      polar_version: '0.1.0',
      backend: { kind: 'vllm', url: 'http://127.0.0.1:8000', token_exact: true },
      model: 'qwen3-4b',
      task_id: `task-${sessions >> 3}`,
      sample: sessions & 7,
      meta: {},
    });
    let seq = 0;
    let prompt = tokens(2000);
    const sub = sessions % 4 === 0 ? { prompt: tokens(1500), turns: 3 } : null;
    while (prompt.length < ctx - 2000) {
      const completion = [...tokens(150 + ((rand() * 300) | 0)), EOT];
      sessionBytes += await put(callRecord(sid, seq++, prompt, completion, 2000));
      calls++;
      if (sub !== null && sub.turns > 0) {
        const sc = [...tokens(100), EOT];
        sessionBytes += await put(callRecord(sid, seq++, sub.prompt, sc, 2000));
        calls++;
        sub.prompt = sub.prompt.concat(sc, tokens(400));
        sub.turns--;
      }
      prompt = prompt.concat(completion, tokens(800 + ((rand() * 1200) | 0)));
    }
    sessionBytes += await put({
      v: 1,
      type: 'session_end',
      session: sid,
      ended_at: T,
      duration_ms: 60000,
      exit_code: 0,
      signal: null,
      calls: seq,
      errors: 0,
      status: 'completed',
    });
    sessionBytes += await put({
      v: 1,
      type: 'grading',
      session: sid,
      task_id: `task-${sessions >> 3}`,
      sample: sessions & 7,
      resolved: rand() < 0.3,
      reward: rand() < 0.3 ? 1 : 0,
      reason: null,
      graded_at: T,
    });
    largest = Math.max(largest, sessionBytes);
    sessions++;
  }
  out.end();
  await once(out, 'finish');
  return { bytes: (await stat(file)).size, sessions, calls, largestSessionBytes: largest };
}

/** Samples peak RSS while `fn` runs. */
async function peakRss<T>(fn: () => Promise<T>): Promise<{ value: T; peak: number }> {
  let peak = process.memoryUsage.rss();
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 20);
  try {
    const value = await fn();
    peak = Math.max(peak, process.memoryUsage.rss());
    return { value, peak };
  } finally {
    clearInterval(timer);
  }
}

const MB = 1024 * 1024;

export async function benchBuild(): Promise<void> {
  const targetMb = Number(process.env.POLAR_BENCH_BUILD_MB ?? 1024);
  const ctx = Number(process.env.POLAR_BENCH_BUILD_CTX ?? 32768);
  const dir = await mkdtemp(join(tmpdir(), 'polar-bench-build-'));
  try {
    const file = join(dir, 'capture.jsonl');
    const g0 = performance.now();
    const gen = await generate(file, targetMb * MB, ctx);
    const genS = (performance.now() - g0) / 1000;

    // baseline: the same line reader, JSON.parse every line, nothing else. Run before and after the
    // build and averaged, so a load change on a shared machine affects both sides alike.
    let parsed = 0;
    const baseline = async (): Promise<{ wall: number; cpu: number }> => {
      const c0 = process.cpuUsage();
      const w0 = performance.now();
      parsed = 0;
      for await (const line of readLines(file)) {
        const v = JSON.parse(line.text) as { type?: unknown };
        if (v.type !== undefined) parsed++;
      }
      const c = process.cpuUsage(c0);
      return { wall: (performance.now() - w0) / 1000, cpu: (c.user + c.system) / 1e6 };
    };
    const base1 = await baseline();

    let outBytes = 0;
    const sink = new Writable({
      write(chunk: Buffer | string, _e, cb) {
        outBytes += chunk.length;
        cb();
      },
    });
    const rssBefore = process.memoryUsage.rss();
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const { value: stats, peak } = await peakRss(() => buildTrajectories({ inputs: [file], output: sink }));
    const buildS = (performance.now() - t0) / 1000;
    const cb = process.cpuUsage(c0);
    const buildCpu = (cb.user + cb.system) / 1e6;
    const base2 = await baseline();
    const baseS = (base1.wall + base2.wall) / 2;
    const baseCpu = (base1.cpu + base2.cpu) / 2;

    const mb = gen.bytes / MB;
    const row = (name: string, s: number, cpu: number): string =>
      `  ${name.padEnd(22)} ${s.toFixed(2).padStart(8)} ${(mb / s).toFixed(1).padStart(8)} ${(gen.sessions / s).toFixed(1).padStart(11)} ${cpu.toFixed(2).padStart(8)}`;
    const ratio = buildS / baseS;
    const cpuRatio = buildCpu / baseCpu;
    const lines = [
      `polar build benchmark: ${mb.toFixed(0)} MB capture (generated in ${genS.toFixed(1)} s), ${gen.sessions} sessions, ${gen.calls} calls, contexts up to ${ctx} tokens, ${parsed} lines`,
      `  ${''.padEnd(22)} ${'seconds'.padStart(8)} ${'MB/s'.padStart(8)} ${'sessions/s'.padStart(11)} ${'cpu s'.padStart(8)}`,
      row('parse-only baseline', baseS, baseCpu),
      row('polar build', buildS, buildCpu),
      `  ratio build/baseline   ${ratio.toFixed(2)}x wall, ${cpuRatio.toFixed(2)}x cpu (target <= 1.5x: ${ratio <= 1.5 ? 'met' : 'NOT met'}; baseline ${base1.wall.toFixed(2)} s before, ${base2.wall.toFixed(2)} s after)`,
      `  output                 ${(outBytes / MB).toFixed(1)} MB, ${stats.trajectories_written} trajectories, ${stats.traces_written} traces, ${(stats.calls_merged / Math.max(1, stats.calls_used)).toFixed(3)} of calls merged`,
      `  memory                 peak RSS ${(peak / MB).toFixed(0)} MB (${(rssBefore / MB).toFixed(0)} MB before the build); largest session ${(gen.largestSessionBytes / MB).toFixed(1)} MB of JSON; file ${mb.toFixed(0)} MB`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await benchBuild();
