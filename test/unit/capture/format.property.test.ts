/**
 * Capture format v2 against v1, as properties over random append-only sessions with branches
 * (compaction, subagents, retries, divergences, failed and text-only calls), two sessions interleaved
 * in one file, bodies with `__proto__` / `constructor` / `toString` keys (issue 22, item 7): v2 read back
 * equals the v1 records; a capture cut at any byte reads up to its last whole
 * record; `polar build` writes the same trajectories from either.
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { readCapture } from '../../../src/capture/reader.ts';
import type { CaptureRecord } from '../../../src/capture/record.ts';
import { type CaptureFormat, CaptureWriter } from '../../../src/capture/writer.ts';
import { buildTrajectories } from '../../../src/trajectory/build.ts';
import { promptIdsReused } from '../../../src/util/prompt-ids.ts';
import { captureArb } from '../../support/capture-arbitraries.ts';
import { type Step, sessionRecord, syntheticCalls } from '../../support/synthetic-capture.ts';
import { tempDir } from '../../support/temp.ts';

const dir = tempDir('polar-format-');
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** Writes records as polar's writer does (calls through the format's encoder). */
function writeCapture(records: readonly CaptureRecord[], format: CaptureFormat): string {
  const path = join(dir, `c${files++}.jsonl`);
  const writer = new CaptureWriter(path, { format });
  for (const r of records) {
    if (r.type === 'call') {
      const encoded = writer.encodeCall(r);
      writer.writeLine(JSON.stringify(encoded.value), encoded);
    } else writer.write(r);
  }
  writer.close();
  return path;
}

async function readAll(path: string, onInvalid?: (e: Error) => void): Promise<CaptureRecord[]> {
  const out: CaptureRecord[] = [];
  for await (const { record } of readCapture(path, onInvalid ? { onInvalid } : {})) out.push(record);
  return out;
}

const asV1 = (records: CaptureRecord[]) => records.map((r) => ({ ...r, v: 1 }));

async function build(path: string): Promise<string> {
  let text = '';
  const sink = new Writable({
    write(chunk: Buffer | string, _e, cb) {
      text += chunk.toString();
      cb();
    },
  });
  await buildTrajectories({ inputs: [path], output: sink });
  return text;
}

describe('capture format v2', () => {
  it('reads back the same records as v1, and smaller whenever a call extends another', async () => {
    await fc.assert(
      fc.asyncProperty(captureArb, async (records) => {
        const v1 = writeCapture(records, 1);
        const v2 = writeCapture(records, 2);
        const expected = JSON.parse(JSON.stringify(records)) as CaptureRecord[];
        assert.deepEqual(await readAll(v1), expected);
        assert.deepEqual(asV1(await readAll(v2)), expected);
        assert.ok(readFileSync(v2).length <= readFileSync(v1).length + 2 * records.length);
      }),
      { numRuns: 60 },
    );
  });

  it('writes deltas: a long session is much smaller in v2', async () => {
    const steps: Step[] = Array.from({ length: 40 }, () => 'extend');
    const records = [
      sessionRecord('s'),
      ...syntheticCalls({ id: 's', steps, seed: 1, newIds: 200, completionIds: 100, textChars: 800 }),
    ];
    const v1 = readFileSync(writeCapture(records, 1)).length;
    const v2 = readFileSync(writeCapture(records, 2)).length;
    // each call repeats the whole history in v1; v2 writes what is new: linear against quadratic
    assert.ok(v2 * 5 < v1, `v2 ${v2} bytes against v1 ${v1}`);
    const lines = readFileSync(writeCapture(records, 2), 'utf8').trim().split('\n');
    const last = JSON.parse(lines.at(-1)!) as { v: number; delta: { base: string; fields: string[] } };
    assert.equal(last.v, 2);
    assert.equal(last.delta.base, 'call_s_39');
    assert.deepEqual(last.delta.fields, [
      'prompt_token_ids',
      'request.body',
      'canonical_request',
      'backend_request.body',
    ]);
  });

  it("reads a v1 session's growing prompts from the ones before, the same records as JSON.parse", async () => {
    // (src/util/prompt-ids.ts: a v1 call record holds the whole prompt; the reader parses only what is new)
    const steps: Step[] = [
      'extend',
      'extend',
      'retry',
      'extend',
      'subagent',
      'extend',
      'compaction',
      'extend',
    ];
    const records = [
      sessionRecord('s'),
      ...syntheticCalls({ id: 's', steps, seed: 3, newIds: 400, completionIds: 120, textChars: 50 }),
    ];
    const path = writeCapture(records, 1);
    const expected = readFileSync(path, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as CaptureRecord);
    const before = promptIdsReused.extended;
    const got = await readAll(path);
    assert.deepEqual(got, expected);
    assert.ok(
      promptIdsReused.extended >= before + 4,
      `${promptIdsReused.extended - before} prompts extended`,
    );
    // each record holds arrays of its own
    (got[2] as { prompt_token_ids: number[] }).prompt_token_ids.fill(0);
    assert.deepEqual(await readAll(path), expected);
  });

  it('reads a capture cut at any byte up to its last whole record', async () => {
    await fc.assert(
      fc.asyncProperty(
        captureArb,
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 4 }),
        async (records, cuts) => {
          for (const format of [1, 2] as const) {
            const bytes = readFileSync(writeCapture(records, format));
            const whole = await readAll(writeCapture(records, format));
            for (const fraction of cuts) {
              const at = Math.floor(fraction * bytes.length);
              const cut = join(dir, `cut${files++}.jsonl`);
              writeFileSync(cut, bytes.subarray(0, at));
              // a line counts once all its bytes (newline aside) are there
              let complete = 0;
              for (let end = bytes.indexOf(10); end >= 0 && end <= at; end = bytes.indexOf(10, end + 1))
                complete++;
              const warned: Error[] = [];
              const got = await readAll(cut, (e) => warned.push(e));
              assert.deepEqual(
                got,
                whole.slice(0, complete),
                `format ${format} cut at ${at} of ${bytes.length}`,
              );
              assert.equal(warned.length, at > 0 && bytes[at - 1] !== 10 && bytes[at] !== 10 ? 1 : 0);
            }
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it('builds the same trajectories from v1 and v2', async () => {
    await fc.assert(
      fc.asyncProperty(captureArb, async (records) => {
        const a = await build(writeCapture(records, 1));
        const b = await build(writeCapture(records, 2));
        assert.equal(b, a);
      }),
      { numRuns: 25 },
    );
  });
});

describe('capture format v2: bad deltas are named', () => {
  const session = sessionRecord('s');
  const calls = syntheticCalls({
    id: 's',
    steps: ['extend'],
    seed: 3,
    newIds: 5,
    completionIds: 3,
    textChars: 40,
  });
  const lines = (() => {
    const path = writeCapture([session, ...calls], 2);
    return readFileSync(path, 'utf8').trim().split('\n');
  })();
  const withSecond = (edit: (r: Record<string, unknown>) => void) => {
    const second = JSON.parse(lines[2]!) as Record<string, unknown>;
    edit(second);
    const path = join(dir, `bad${files++}.jsonl`);
    writeFileSync(path, `${lines[0]}\n${lines[1]}\n${JSON.stringify(second)}\n`);
    return readAll(path);
  };

  it('a base that is not an earlier call of the session', async () => {
    await assert.rejects(
      withSecond((r) => {
        (r.delta as { base: string }).base = 'call_nowhere';
      }),
      /:3: delta\.base: call call_nowhere is not an earlier call of this session in this file/,
    );
  });

  it('a keep beyond the base', async () => {
    await assert.rejects(
      withSecond((r) => {
        (r.prompt_token_ids as { keep: number }).keep = 10_000;
      }),
      /:3: prompt_token_ids\.keep: keeps 10000 ids of a base with \d+ \(prompt \+ completion\)/,
    );
  });

  it('an unknown delta field', async () => {
    await assert.rejects(
      withSecond((r) => {
        (r.delta as { fields: string[] }).fields.push('response.body');
      }),
      /:3: delta\.fields: unknown delta field "response\.body"/,
    );
  });
});
