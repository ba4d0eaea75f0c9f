/**
 * Issue 22, item 10: the outputs that hold the same prompts and code as a capture get a capture's modes:
 * files 0600, the folders polar creates 0700 (an existing file or folder keeps its own). Checked on the
 * real commands: `polar build -o` (trajectories), `polar inspect -o` (the HTML report), `polar eval`
 * (results.jsonl, predictions.jsonl, report.json, patches/, logs/, captures/); polar gym writes its
 * rollouts through the same eval code, in a folder per rollout made the same way.
 */
import assert from 'node:assert/strict';
import { readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { CaptureWriter } from '../../../src/capture/writer.ts';
import { sessionEndRecord, sessionRecord, syntheticCalls } from '../../support/synthetic-capture.ts';
import { tempDir } from '../../support/temp.ts';
import { fixtures, localEval, polar } from '../rollout/run/helpers.ts';

const dir = tempDir('polar-modes-');
after(() => rmSync(dir, { recursive: true, force: true }));
before(() => fixtures());

const mode = (path: string) => statSync(path).mode & 0o777;
const octal = (m: number) => m.toString(8).padStart(4, '0');

function assertPrivate(path: string): void {
  const want = statSync(path).isDirectory() ? 0o700 : 0o600;
  assert.equal(octal(mode(path)), octal(want), path);
}

/** a capture with one session of a few calls, written as polar writes one */
function capture(): string {
  const path = join(dir, 'capture.jsonl');
  const writer = new CaptureWriter(path);
  writer.write(sessionRecord('s'));
  for (const call of syntheticCalls({
    id: 's',
    steps: ['extend', 'extend'],
    seed: 1,
    newIds: 4,
    completionIds: 3,
    textChars: 20,
  })) {
    const encoded = writer.encodeCall(call);
    writer.writeLine(JSON.stringify(encoded.value), encoded);
  }
  writer.write(sessionEndRecord('s', 3));
  writer.close();
  return path;
}

test('polar build -o and polar inspect -o: 0600 files in 0700 folders (with the usual umask)', () => {
  const input = capture();
  const built = join(dir, 'build', 'deeper', 'trajectories.jsonl');
  const b = polar(['build', input, '-o', built, '--quiet']);
  assert.equal(b.code, 0, b.stderr);
  assertPrivate(built);
  assertPrivate(join(dir, 'build'));
  assertPrivate(join(dir, 'build', 'deeper'));
  const page = join(dir, 'inspect', 'report.html');
  const i = polar(['inspect', built, '-o', page]);
  assert.equal(i.code, 0, i.stderr);
  assertPrivate(page);
  assertPrivate(join(dir, 'inspect'));
});

test('polar eval: results, predictions, report, patches, logs and their folders', () => {
  const out = join(dir, 'eval');
  const r = localEval('gold', out, ['--instances', 'polar-fixtures__jsutil-5', '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  const walk = (p: string): string[] =>
    statSync(p).isDirectory() ? [p, ...readdirSync(p).flatMap((n) => walk(join(p, n)))] : [p];
  const all = walk(out);
  for (const name of ['results.jsonl', 'predictions.jsonl', 'report.json', 'patches', 'logs', 'captures'])
    assert.ok(all.includes(join(out, name)), `${name} was written`);
  assert.ok(
    all.some((p) => p.endsWith('.diff')),
    'a patch was written',
  );
  for (const p of all) assertPrivate(p);
});
