/**
 * Capture format v1 against v2, side by side: bytes per session, time to write the session (encode and
 * append) and `polar build` time, for synthetic append-only sessions of 10, 50 and 200 calls that grow to
 * a 32k-token context (test/support/synthetic-capture.ts: harness body, canonical request and ids grow
 * together, about 4 characters of text per token). Timings alternate v1 and v2 runs in one process and
 * keep the best of each, so a load change on a shared machine hits both formats alike.
 *
 *   POLAR_BENCH_CAPTURE_CTX    context each session grows to, in tokens (default 32768)
 *   POLAR_BENCH_CAPTURE_REPS   timed repetitions per format (default 3)
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import type { CaptureRecord } from '../src/capture/record.ts';
import { type CaptureFormat, CaptureWriter } from '../src/capture/writer.ts';
import { buildTrajectories } from '../src/trajectory/build.ts';
import { sessionEndRecord, sessionRecord, syntheticCalls } from '../test/support/synthetic-capture.ts';

function sessionOf(calls: number, ctx: number): CaptureRecord[] {
  const perCall = Math.floor((ctx - 2000) / calls);
  const completionIds = Math.min(300, Math.max(8, Math.floor(perCall / 3)));
  const newIds = Math.max(1, perCall - completionIds);
  const id = `sess_${calls}`;
  return [
    sessionRecord(id),
    ...syntheticCalls({
      id,
      steps: Array.from({ length: calls - 1 }, () => 'extend' as const),
      seed: calls,
      newIds,
      completionIds,
      textChars: newIds * 4,
      systemIds: 2000,
    }),
    sessionEndRecord(id, calls),
  ];
}

function write(path: string, records: readonly CaptureRecord[], format: CaptureFormat): number {
  const t0 = performance.now();
  const writer = new CaptureWriter(path, { format });
  for (const r of records) {
    if (r.type === 'call') {
      const encoded = writer.encodeCall(r);
      writer.writeLine(JSON.stringify(encoded.value), encoded);
    } else writer.write(r);
  }
  writer.close();
  return performance.now() - t0;
}

async function build(path: string): Promise<{ ms: number; digest: string }> {
  const hash = createHash('sha256');
  const sink = new Writable({
    write(chunk: Buffer | string, _e, cb) {
      hash.update(chunk);
      cb();
    },
  });
  const t0 = performance.now();
  await buildTrajectories({ inputs: [path], output: sink });
  return { ms: performance.now() - t0, digest: hash.digest('hex') };
}

const kb = (n: number) => `${(n / 1024).toFixed(0)} KB`;

export async function benchCapture(): Promise<void> {
  const ctx = Number(process.env.POLAR_BENCH_CAPTURE_CTX ?? 32768);
  const reps = Number(process.env.POLAR_BENCH_CAPTURE_REPS ?? 3);
  const dir = await mkdtemp(join(tmpdir(), 'polar-bench-capture-'));
  console.log(
    `\n## capture format: one append-only session growing to ${ctx} tokens; best of ${reps} alternated runs per format`,
  );
  console.log(
    '| calls | v1 bytes | v2 bytes | v2/v1 | write v1 ms | write v2 ms | build v1 ms | build v2 ms | build v2/v1 | same output |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  try {
    for (const calls of [10, 50, 200]) {
      const records = sessionOf(calls, ctx);
      const files = { 1: join(dir, `s${calls}.v1.jsonl`), 2: join(dir, `s${calls}.v2.jsonl`) } as const;
      const best = { write: { 1: Infinity, 2: Infinity }, build: { 1: Infinity, 2: Infinity } };
      const outputs: Record<number, string> = {};
      for (let i = 0; i < reps; i++) {
        for (const f of [1, 2] as const) {
          await rm(files[f], { force: true });
          best.write[f] = Math.min(best.write[f], write(files[f], records, f));
        }
        for (const f of [1, 2] as const) {
          const b = await build(files[f]);
          best.build[f] = Math.min(best.build[f], b.ms);
          outputs[f] = b.digest;
        }
      }
      const size = { 1: (await stat(files[1])).size, 2: (await stat(files[2])).size };
      console.log(
        `| ${calls} | ${kb(size[1])} | ${kb(size[2])} | ${(size[2] / size[1]).toFixed(3)} | ${best.write[1].toFixed(1)} | ${best.write[2].toFixed(1)} | ${best.build[1].toFixed(1)} | ${best.build[2].toFixed(1)} | ${(best.build[2] / best.build[1]).toFixed(2)} | ${outputs[1] === outputs[2] ? 'yes' : 'NO'} |`,
      );
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await benchCapture();
