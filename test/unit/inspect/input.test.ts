/**
 * polar inspect's input and tokenizer (issue 18): a capture file is an error that names polar build;
 * an empty file is a warning; the tokenizer is the trajectories' model's own when its files are at
 * hand, and the bundled Qwen3 one comes with a warning when the trajectories name another model.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { InputError } from '../../../src/errors.ts';
import { chooseDecoder, inspectToHtml } from '../../../src/inspect/command.ts';
import { defaultTokenizerDir } from '../../../src/inspect/tokens.ts';
import { tempDir } from '../../support/temp.ts';
import { makeRecord, makeTrace, writeJsonl } from './helpers.ts';

const tmp = tempDir('polar-inspect-input-');

describe('polar inspect input', () => {
  test('a capture file is an error that says to run polar build first', async () => {
    const capture = join(tmp, 'capture.jsonl');
    writeJsonl(capture, [
      { v: 1, type: 'session', id: 's', harness: 'pi' },
      { v: 1, type: 'call', session: 's', seq: 0 },
    ]);
    await assert.rejects(
      inspectToHtml(capture, {}),
      (e: unknown) =>
        e instanceof InputError &&
        /is a capture file \(session and call records\), not trajectories/.test(e.message) &&
        /polar build/.test(String(e.hint)),
    );
    const junk = join(tmp, 'junk.jsonl');
    writeJsonl(junk, [{ hello: 1 }]);
    await assert.rejects(inspectToHtml(junk, {}), /holds no valid trajectory \(1 invalid line; first:/);
  });

  test('an empty trajectory file still makes a page', async () => {
    const empty = join(tmp, 'empty.jsonl');
    writeFileSync(empty, '');
    assert.match(await inspectToHtml(empty, {}), /<html/i);
  });
});

describe('polar inspect tokenizer', () => {
  test("the model's own tokenizer when its files are at hand, in a local dir or a cache", async () => {
    const own = join(tmp, 'my-model');
    mkdirSync(own);
    cpSync(defaultTokenizerDir(), own, { recursive: true });
    const local = await chooseDecoder(undefined, [own], []);
    assert.equal(local.decoder.source, own);
    assert.deepEqual(local.warnings, []);
    const cache = join(tmp, 'cache');
    mkdirSync(join(cache, 'org'), { recursive: true });
    cpSync(defaultTokenizerDir(), join(cache, 'org', 'llama-x'), { recursive: true });
    const cached = await chooseDecoder(undefined, ['org/llama-x'], [cache]);
    assert.equal(cached.decoder.source, join(cache, 'org', 'llama-x'));
  });

  test('the bundled Qwen3 tokenizer warns when the trajectories name another model; --tokenizer wins', async () => {
    const other = await chooseDecoder(undefined, ['meta-llama/Llama-3.1-8B'], []);
    assert.equal(other.decoder.source, defaultTokenizerDir());
    assert.match(
      other.warnings[0] ?? '',
      /name meta-llama\/Llama-3\.1-8B, whose tokenizer files are not at hand/,
    );
    const qwen = await chooseDecoder(undefined, ['Qwen/Qwen3-4B'], []);
    assert.deepEqual(qwen.warnings, []);
    const given = await chooseDecoder(defaultTokenizerDir(), ['meta-llama/Llama-3.1-8B'], []);
    assert.deepEqual(given.warnings, []);
    // the page shows the warning too
    const file = join(tmp, 'llama.jsonl');
    writeJsonl(file, [makeRecord('r1', [await makeTrace()], { model: 'meta-llama/Llama-3.1-8B' })]);
    assert.match(await inspectToHtml(file, {}), /whose tokenizer files are not at hand/);
  });
});
