/**
 * docs/cli.md's `polar eval --config examples/config/eval-gold.yaml` lines, run as written (issue 47 item
 * 3), in a copy of the repository's layout (examples/config and the fixture benchmark's dataset and
 * sources), so nothing is written into the repository; then the run's run.json given back as --config
 * repeats it: the same settings, the same given options but --out, the same result.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT, runPolar } from '../../support/cli.ts';
import { runnableBlocks } from '../../support/doc-blocks.ts';
import { tempDir } from '../../support/temp.ts';

/** The lines of docs/cli.md's block marked as run by this test (test/support/doc-blocks.ts), as argv. */
function documentedLines(): string[][] {
  const lines = (runnableBlocks('docs/cli.md', import.meta.url)[0] ?? []).map((l) => l.split(/\s+/).slice(1));
  assert.ok(lines.length >= 2 && lines.every((l) => l[0] === 'eval'), 'the eval --config lines');
  return lines;
}

const runJson = (dir: string) => JSON.parse(readFileSync(join(dir, 'run.json'), 'utf8'));
const report = (dir: string) => JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8'));

test("docs/cli.md's eval --config lines run as written, and run.json given back repeats the run", async () => {
  const root = tempDir('polar-config-run-');
  cpSync(join(ROOT, 'examples/config'), join(root, 'examples/config'), { recursive: true });
  mkdirSync(join(root, 'fixtures/swe'), { recursive: true });
  cpSync(join(ROOT, 'fixtures/swe/mini.jsonl'), join(root, 'fixtures/swe/mini.jsonl'));
  cpSync(join(ROOT, 'fixtures/swe/src'), join(root, 'fixtures/swe/src'), { recursive: true });
  const [first, second] = documentedLines();
  const one = await runPolar([...(first ?? []), '-q'], { cwd: root });
  assert.equal(one.code, 0, one.stderr);
  const out1 = join(root, 'runs/eval-gold');
  assert.equal(report(out1).pass_at_1.mean, 1);
  // the command line wins: --samples 2 and another --out over the file's
  const two = await runPolar([...(second ?? []), '-q'], { cwd: root });
  assert.equal(two.code, 0, two.stderr);
  const out2 = join(root, 'runs/eval-gold-2');
  assert.equal(report(out2).samples, 2);
  assert.equal(runJson(out2).config.samples, '2');

  // the record given back: the same run into another folder
  const three = await runPolar(['eval', '--config', join(out1, 'run.json'), '--out', 'runs/again', '-q'], {
    cwd: root,
  });
  assert.equal(three.code, 0, three.stderr);
  const out3 = join(root, 'runs/again');
  assert.deepEqual(runJson(out3).settings, runJson(out1).settings);
  assert.deepEqual(runJson(out3).config, { ...runJson(out1).config, out: 'runs/again' });
  assert.equal(report(out3).pass_at_1.mean, report(out1).pass_at_1.mean);
});
