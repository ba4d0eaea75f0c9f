/**
 * Capture format 3's `weight_versions` (issue 48): which weights sampled a call, as the server reported
 * them (SGLang's metadata) or as polar published them, and the `policy_version` the staleness accounting
 * reads from it; written by format 3, left out by 1 and 2, checked on read (old files still read); the
 * proxy's view of a call against the weight updates (src/backends/weight-updates.ts).
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { reportedWeightVersions, WeightUpdates } from '../../../src/backends/weight-updates.ts';
import { toCallRecord } from '../../../src/capture/call-record.ts';
import { readCapture } from '../../../src/capture/reader.ts';
import type { CallRecord, CaptureRecord } from '../../../src/capture/record.ts';
import { type CaptureFormat, CaptureWriter } from '../../../src/capture/writer.ts';
import { InputError } from '../../../src/errors.ts';
import type { CompletedCall } from '../../../src/proxy/call.ts';
import { completedCall } from '../../support/call-recording.ts';
import { tempDir } from '../../support/temp.ts';

const dir = tempDir('polar-weight-versions-');
after(() => rmSync(dir, { recursive: true, force: true }));
const session = { id: 's', harness: 'generic', tokenExact: false };
const record = (over: Partial<CompletedCall>) => toCallRecord(completedCall('c', over), session, 0);

let files = 0;
function write(records: CallRecord[], format: CaptureFormat): string {
  const path = join(dir, `c${files++}.jsonl`);
  const writer = new CaptureWriter(path, { format });
  for (const r of records) {
    const encoded = writer.encodeCall(r);
    writer.writeLine(JSON.stringify(encoded.value), encoded);
  }
  writer.close();
  return path;
}

async function read(path: string): Promise<CaptureRecord[]> {
  const out: CaptureRecord[] = [];
  for await (const { record } of readCapture(path)) out.push(record);
  return out;
}

describe('a call record names the weights that sampled it', () => {
  test("polar's own versions: a call a keep update crossed names both, policy_version the older", () => {
    const r = record({ policyVersion: 2, weightVersions: { source: 'polar', versions: ['2', '3'] } });
    assert.deepEqual(r.weight_versions, { source: 'polar', versions: ['2', '3'] });
    assert.equal(r.policy_version, 2);
  });

  test("the server's labels win when they are polar's (a call the server held past an update)", () => {
    const r = record({
      policyVersion: 3,
      weightVersions: {
        source: 'server',
        versions: ['4', '5'],
        spans: [
          { version: '4', start: 0, end: 7 },
          { version: '5', start: 7, end: 9 },
        ],
      },
    });
    assert.equal(r.policy_version, 4);
    assert.equal(r.weight_versions?.spans?.length, 2);
  });

  test("a label polar did not set (SGLang's 'default') leaves policy_version to polar's version", () => {
    const r = record({ policyVersion: 0, weightVersions: { source: 'server', versions: ['default'] } });
    assert.equal(r.policy_version, 0);
    assert.deepEqual(r.weight_versions, { source: 'server', versions: ['default'] });
  });

  test('outside a loop the server says, and no policy_version is made up', () => {
    const r = record({ weightVersions: { source: 'server', versions: ['7'] } });
    assert.equal(r.policy_version, undefined);
    assert.deepEqual(r.weight_versions, { source: 'server', versions: ['7'] });
    const plain = record({});
    assert.equal('weight_versions' in plain, false);
    assert.equal('policy_version' in plain, false);
  });
});

describe('capture format 3', () => {
  const calls = [
    record({ policyVersion: 1, weightVersions: { source: 'polar', versions: ['1'] } }),
    { ...record({}), id: 'd', seq: 1 },
  ];

  test('format 3 writes weight_versions and reads it back; 1 and 2 leave it out', async () => {
    const v3 = await read(write(calls, 3));
    assert.equal((v3[0] as CallRecord).v, 3);
    assert.deepEqual((v3[0] as CallRecord).weight_versions, { source: 'polar', versions: ['1'] });
    for (const format of [1, 2] as const) {
      const back = (await read(write(calls, format))) as CallRecord[];
      assert.equal(back[0]!.v, format);
      assert.equal('weight_versions' in back[0]!, false, `format ${format} has no weight_versions`);
      assert.equal(back[0]!.policy_version, 1, 'policy_version is written by every format');
    }
  });

  test('a file of an earlier polar (format 2, no weight_versions) still reads', async () => {
    const path = join(dir, 'old.jsonl');
    const { weight_versions: _, ...old } = calls[0]!;
    writeFileSync(path, `${JSON.stringify({ ...old, v: 2 })}\n`);
    const [back] = (await read(path)) as CallRecord[];
    assert.equal(back!.policy_version, 1);
  });

  for (const [what, bad, field] of [
    ['no versions', { source: 'polar', versions: [] }, 'weight_versions.versions'],
    ['an unknown source', { source: 'trainer', versions: ['1'] }, 'weight_versions.source'],
    [
      'a span before the first token',
      { source: 'server', versions: ['1'], spans: [{ version: '1', start: -1, end: 2 }] },
      'weight_versions.spans',
    ],
    ['a version that is not a string', { source: 'polar', versions: [1] }, 'weight_versions.versions'],
  ] as const) {
    test(`a record with ${what} is refused, naming the field`, async () => {
      const path = join(dir, `bad-${files++}.jsonl`);
      writeFileSync(path, `${JSON.stringify({ ...calls[0], weight_versions: bad })}\n`);
      await assert.rejects(read(path), (error: unknown) => {
        assert.ok(error instanceof InputError);
        assert.match(error.message, new RegExp(`:1: ${field.replaceAll('.', '\\.')}`));
        return true;
      });
    });
  }

  test('a format 3 call extending an earlier one is written as a delta and reads back whole', async () => {
    const first = record({ policyVersion: 0, weightVersions: { source: 'polar', versions: ['0'] } });
    first.prompt_token_ids = [1, 2, 3];
    first.completion_token_ids = [4];
    // (a call becomes a base for deltas once it has a canonical request)
    first.canonical_request = { messages: [] };
    const second = {
      ...record({ policyVersion: 1, weightVersions: { source: 'polar', versions: ['1'] } }),
      id: 'c2',
      seq: 1,
      prompt_token_ids: [1, 2, 3, 4, 5],
      completion_token_ids: [6],
      canonical_request: { messages: [] },
    };
    const path = write([first, second], 3);
    const line = JSON.parse(readFileSync(path, 'utf8').trim().split('\n')[1]!);
    assert.deepEqual(line.prompt_token_ids, { keep: 4, add: [5] });
    const back = (await read(path)) as CallRecord[];
    assert.deepEqual(back[1]!.prompt_token_ids, [1, 2, 3, 4, 5]);
    assert.deepEqual(back[1]!.weight_versions, { source: 'polar', versions: ['1'] });
  });
});

describe("the versions a server reports (SGLang's answers)", () => {
  test('a chat completion: metadata.weight_versions, spans over the completion tokens', () => {
    const spans = [
      { version: '3', start: 0, end: 57 },
      { version: '4', start: 57, end: 128 },
    ];
    assert.deepEqual(reportedWeightVersions({ metadata: { weight_version: '4', weight_versions: spans } }), {
      versions: ['3', '4'],
      spans,
    });
  });

  test('an older SGLang: the single weight_version; a choice or /generate meta_info alike', () => {
    assert.deepEqual(reportedWeightVersions({ metadata: { weight_version: 'default' } }), {
      versions: ['default'],
    });
    assert.deepEqual(reportedWeightVersions({ choices: [{ meta_info: { weight_version: '2' } }] }), {
      versions: ['2'],
    });
    assert.deepEqual(reportedWeightVersions({ meta_info: { weight_version: '5' } }), { versions: ['5'] });
  });

  test("vLLM's chat answer reports none", () => {
    assert.equal(
      reportedWeightVersions({ choices: [{ message: { content: 'x' }, token_ids: [1] }], usage: {} }),
      null,
    );
  });
});

describe('a call against the weight updates (what polar knows)', () => {
  test('wait: a call in flight finishes on the old version; a call that starts during it waits for the new', () => {
    const u = new WeightUpdates();
    const inFlight = u.mark();
    u.begin('wait');
    const during = u.mark();
    u.end(1);
    assert.deepEqual(u.versionsOf(inFlight, 0), [0]);
    assert.deepEqual(u.versionsOf(during, 0), [1]);
    assert.equal(u.abortedSince(inFlight), false);
  });

  test('keep: a call in flight is sampled by both; abort: it was cut', () => {
    const u = new WeightUpdates();
    const before = u.mark();
    u.begin('keep');
    u.end(1);
    assert.deepEqual(u.versionsOf(before, 0), [0, 1]);
    const next = u.mark();
    u.begin('abort');
    assert.equal(u.abortedSince(next), true);
    u.end(2);
    assert.deepEqual(u.versionsOf(u.mark(), 2), [2]);
    assert.equal(u.abortedSince(u.mark()), false);
  });

  test('a failed update publishes no version: the call keeps the one it started with', async () => {
    const u = new WeightUpdates();
    u.begin('keep');
    const during = u.mark();
    let settled = false;
    const waiting = u.settled().then(() => {
      settled = true;
    });
    await Promise.resolve();
    assert.equal(settled, false, 'settled waits for the update');
    u.end(undefined);
    await waiting;
    assert.deepEqual(u.versionsOf(during, 3), [3]);
    assert.throws(() => {
      u.begin('wait');
      u.begin('wait');
    }, /already running/);
  });
});
