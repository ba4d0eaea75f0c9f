/**
 * The failed-writes property of test/unit/capture/failed-writes.property.test.ts, run in a child process
 * under a real file-size limit (`ulimit -f`, which node cannot set on itself): random captures (two
 * interleaved sessions with branches and `__proto__`-style keys, test/support/capture-arbitraries.ts)
 * written in v2 as polar's recorder writes them (encodeCall, then writeLine with the encoded call), where
 * the calls picked at random carry a field larger than the limit, so their write fails with EFBIG and
 * is cut back. Every record written reads back (strictly, no line skipped) as the same record as v1,
 * and exactly the picked calls are missing. Usage: node --import tsx failed-writes-child.ts DIR RUNS PAD
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { readCapture } from '../../src/capture/reader.ts';
import type { CaptureRecord } from '../../src/capture/record.ts';
import { CaptureWriteError, CaptureWriter } from '../../src/capture/writer.ts';
import { captureArb } from './capture-arbitraries.ts';

const [dir, runs, pad] = [process.argv[2]!, Number(process.argv[3]), Number(process.argv[4])];
const padding = 'x'.repeat(pad);
let files = 0;

async function readAll(path: string): Promise<CaptureRecord[]> {
  const out: CaptureRecord[] = [];
  for await (const { record } of readCapture(path)) out.push(record);
  return out;
}

await fc.assert(
  fc.asyncProperty(
    captureArb,
    fc.array(fc.boolean(), { minLength: 1, maxLength: 40 }),
    async (records, fails) => {
      const path = join(dir, `f${files++}.jsonl`);
      const writer = new CaptureWriter(path, { format: 2 });
      const written: CaptureRecord[] = [];
      let picked = 0;
      let failed = 0;
      records.forEach((r, i) => {
        if (r.type !== 'call') {
          writer.write(r);
          written.push(r);
          return;
        }
        const fail = fails[i % fails.length]!;
        picked += fail ? 1 : 0;
        // the oversized field is one the delta leaves literal: the record still extends its base
        const record = fail ? { ...r, harness_meta: { ...r.harness_meta, pad: padding } } : r;
        const encoded = writer.encodeCall(record);
        try {
          writer.writeLine(JSON.stringify(encoded.value), encoded);
          written.push(r);
        } catch (error) {
          if (!(error instanceof CaptureWriteError)) throw error;
          failed++;
        }
      });
      writer.close();
      assert.equal(failed, picked, 'exactly the oversized calls failed');
      assert.ok(readFileSync(path).at(-1) === 10, 'the file ends with a whole record');
      const expected = JSON.parse(JSON.stringify(written)) as CaptureRecord[];
      const got = (await readAll(path)).map((r) => ({ ...r, v: 1 }));
      assert.deepEqual(got, expected);
    },
  ),
  { numRuns: runs },
);
console.log(`failed-writes property: ${runs} runs passed`);
