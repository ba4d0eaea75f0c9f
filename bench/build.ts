/**
 * Benchmark of `polar build`: throughput on a generated capture (many sessions, contexts growing to
 * 32k tokens, token-exact), against a baseline that only reads every line of the same file and
 * JSON.parses it, measured in the same run. Target (issue 25): build within 1.5x of the baseline on a
 * format v1 capture, memory bounded by the largest session (the build streams; it never holds the whole
 * file). The same records are also written in format v2 (each prompt a delta of an earlier call's, as
 * polar's capture writer writes them) and built: no target there (the input is a small part of v1's,
 * the output the same), but what the build costs on polar's own format is printed beside it.
 *
 *   POLAR_BENCH_BUILD_MB   v1 capture size in MB (default 1024)
 *   POLAR_BENCH_BUILD_CTX  context length each session grows to, in tokens (default 32768)
 *
 * The captures are written to a temporary directory, deleted at the end.
 */
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { CallEncoder } from '../src/capture/codec.ts';
import type { CallRecord, CaptureRecord } from '../src/capture/record.ts';
import { buildTrajectories } from '../src/trajectory/build.ts';
import { readLines } from '../src/util/jsonl.ts';
import { seededRandom } from '../src/util/random.ts';

const EOT = 151645;
const T = '2026-01-01T00:00:00.000Z';

interface Generated {
  bytes: number;
  /** the same records in capture format v2 (src/capture/codec.ts: each prompt as a delta of the one before) */
  v2Bytes: number;
  sessions: number;
  calls: number;
  largestSessionBytes: number;
}

/** Writes sessions until the file reaches `targetBytes`. Each session: a root chain of tool turns up to
 * `ctx` tokens; every fourth session also has an interleaved subagent chain; then session_end, grading.
 * The same records go to `v2File` in format v2, through the capture writer's own encoder. */
async function generate(file: string, v2File: string, targetBytes: number, ctx: number): Promise<Generated> {
  const out = createWriteStream(file, { encoding: 'utf8', highWaterMark: 1 << 22 });
  const outV2 = createWriteStream(v2File, { encoding: 'utf8', highWaterMark: 1 << 22 });
  const encoder = new CallEncoder();
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
  const put = async (value: CaptureRecord): Promise<number> => {
    const line = `${JSON.stringify(value)}\n`;
    bytes += line.length;
    if (!out.write(line)) await once(out, 'drain');
    let v2Line: string;
    if (value.type === 'call') {
      const encoded = encoder.encode(value);
      v2Line = `${JSON.stringify(encoded.value)}\n`;
      encoded.commit();
    } else v2Line = `${JSON.stringify({ ...value, v: 2 })}\n`;
    if (value.type === 'session_end') encoder.end(value.session);
    if (!outV2.write(v2Line)) await once(outV2, 'drain');
    return line.length;
  };
  const callRecord = (
    sid: string,
    seq: number,
    prompt: number[],
    completion: number[],
    text: number,
  ): CallRecord => ({
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
    // (small: v2's encoder makes a call the base of later ones only when it has a canonical request)
    canonical_request: { model: 'qwen3-4b', messages: [], tools: [], stream: true },
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
  outV2.end();
  await Promise.all([once(out, 'finish'), once(outV2, 'finish')]);
  return {
    bytes: (await stat(file)).size,
    v2Bytes: (await stat(v2File)).size,
    sessions,
    calls,
    largestSessionBytes: largest,
  };
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

/** What one file gave: the parse-only baseline (before and after the build) and the build. */
interface Measured {
  base1: { wall: number; cpu: number };
  base2: { wall: number; cpu: number };
  buildS: number;
  buildCpu: number;
  lines: number;
  outBytes: number;
  stats: Awaited<ReturnType<typeof buildTrajectories>>;
  peak: number;
  rssBefore: number;
}

async function measure(file: string): Promise<Measured> {
  // baseline: the same line reader, JSON.parse every line, nothing else. Run before and after the
  // build and averaged, so a load change on a shared machine affects both sides alike.
  let lines = 0;
  const baseline = async (): Promise<{ wall: number; cpu: number }> => {
    const c0 = process.cpuUsage();
    const w0 = performance.now();
    lines = 0;
    for await (const line of readLines(file)) {
      const v = JSON.parse(line.text) as { type?: unknown };
      if (v.type !== undefined) lines++;
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
  const base2 = await baseline();
  return {
    base1,
    base2,
    buildS,
    buildCpu: (cb.user + cb.system) / 1e6,
    lines,
    outBytes,
    stats,
    peak,
    rssBefore,
  };
}

export async function benchBuild(): Promise<void> {
  const targetMb = Number(process.env.POLAR_BENCH_BUILD_MB ?? 1024);
  const ctx = Number(process.env.POLAR_BENCH_BUILD_CTX ?? 32768);
  const dir = await mkdtemp(join(tmpdir(), 'polar-bench-build-'));
  try {
    const file = join(dir, 'capture.jsonl');
    const v2File = join(dir, 'capture-v2.jsonl');
    const g0 = performance.now();
    const gen = await generate(file, v2File, targetMb * MB, ctx);
    const genS = (performance.now() - g0) / 1000;
    const v1 = await measure(file);
    const v2 = await measure(v2File);

    const table = (m: Measured, bytes: number, title: string, target: boolean): string[] => {
      const mb = bytes / MB;
      const baseS = (m.base1.wall + m.base2.wall) / 2;
      const baseCpu = (m.base1.cpu + m.base2.cpu) / 2;
      const row = (name: string, s: number, cpu: number): string =>
        `  ${name.padEnd(22)} ${s.toFixed(2).padStart(8)} ${(mb / s).toFixed(1).padStart(8)} ${(gen.sessions / s).toFixed(1).padStart(11)} ${cpu.toFixed(2).padStart(8)}`;
      const ratio = m.buildS / baseS;
      const verdict = target ? `target <= 1.5x: ${ratio <= 1.5 ? 'met' : 'NOT met'}` : 'no target';
      return [
        `${title}: ${mb.toFixed(0)} MB, ${m.lines} lines`,
        `  ${''.padEnd(22)} ${'seconds'.padStart(8)} ${'MB/s'.padStart(8)} ${'sessions/s'.padStart(11)} ${'cpu s'.padStart(8)}`,
        row('parse-only baseline', baseS, baseCpu),
        row('polar build', m.buildS, m.buildCpu),
        `  ratio build/baseline   ${ratio.toFixed(2)}x wall, ${(m.buildCpu / baseCpu).toFixed(2)}x cpu (${verdict}; baseline ${m.base1.wall.toFixed(2)} s before, ${m.base2.wall.toFixed(2)} s after)`,
        `  output                 ${(m.outBytes / MB).toFixed(1)} MB, ${m.stats.trajectories_written} trajectories, ${m.stats.traces_written} traces, ${(m.stats.calls_merged / Math.max(1, m.stats.calls_used)).toFixed(3)} of calls merged`,
        `  memory                 peak RSS ${(m.peak / MB).toFixed(0)} MB (${(m.rssBefore / MB).toFixed(0)} MB before the build); largest session ${(gen.largestSessionBytes / MB).toFixed(1)} MB of JSON (v1)`,
      ];
    };
    const lines = [
      `polar build benchmark: ${gen.sessions} sessions, ${gen.calls} calls, contexts up to ${ctx} tokens (generated in ${genS.toFixed(1)} s)`,
      ...table(v1, gen.bytes, 'capture format v1 (each call holds its whole prompt)', true),
      // (the build's work is the same, its input is smaller: a ratio to parsing the small input, reported
      // so that what the build costs on polar's own format is in view)
      ...table(
        v2,
        gen.v2Bytes,
        'the same records in format v2 (what polar writes: each prompt a delta)',
        false,
      ),
      `  v2 against v1          build ${(v2.buildS / v1.buildS).toFixed(2)}x the time; the same output: ${v2.outBytes === v1.outBytes && v2.stats.traces_written === v1.stats.traces_written ? 'yes' : 'NO'}`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await benchBuild();
