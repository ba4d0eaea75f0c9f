/**
 * `polar export --out DIR` replaces DIR whole, so a folder that holds something other than a previous
 * export is refused unless --overwrite (issue 31 item 2): nothing is deleted, the files are named.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { UsageError } from '../../../src/errors.ts';
import { runExport } from '../../../src/export/export.ts';
import { tempDir } from '../../support/temp.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
const tmp = tempDir('polar-export-out-');
const reached = new Error('the exporter would start');
const probe = async () => {
  throw reached;
};

test('a folder of other files is refused, and kept', async () => {
  const out = join(tmp, 'notes');
  mkdirSync(out);
  writeFileSync(join(out, 'notes.txt'), 'mine');
  await assert.rejects(
    runExport({ checkpoint: 'tiny:vocab=64', onnx: out }, { probe }),
    (e: unknown) =>
      e instanceof UsageError &&
      /--out .*notes holds files that are not a polar export \(notes\.txt\)/.test(e.message) &&
      /--overwrite/.test(String(e.hint)),
  );
  assert.equal(readFileSync(join(out, 'notes.txt'), 'utf8'), 'mine');
  // --overwrite says to replace it: the export goes ahead
  await assert.rejects(
    runExport({ checkpoint: 'tiny:vocab=64', onnx: out, overwrite: true }, { probe }),
    reached,
  );
  const cli = spawnSync(
    process.execPath,
    [join(ROOT, 'bin/polar'), 'export', 'tiny:vocab=64', '--out', out],
    {
      encoding: 'utf8',
    },
  );
  assert.equal(cli.status, 2, cli.stderr);
  assert.match(cli.stderr, /polar: error: --out .* holds files that are not a polar export/);
});

test('a previous export and an empty folder are replaced without a word', async () => {
  const previous = join(tmp, 'previous');
  mkdirSync(join(previous, 'onnx'), { recursive: true });
  writeFileSync(join(previous, 'config.json'), JSON.stringify({ model_type: 'llama', polar_export: {} }));
  await assert.rejects(runExport({ checkpoint: 'tiny:vocab=64', onnx: previous }, { probe }), reached);
  const empty = join(tmp, 'empty');
  mkdirSync(empty);
  await assert.rejects(runExport({ checkpoint: 'tiny:vocab=64', onnx: empty }, { probe }), reached);
});
