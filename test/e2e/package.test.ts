/**
 * polar installed from its packed tarball into an empty project (issue 31 item 8;
 * test/support/packed-polar.ts): `npx polar --help`, and `npx polar capture -- pi ...` with Pi found on
 * PATH (the user's own install; here the clone's) against the embedded tiny model, offline, then
 * `npx polar build`; the offline benchmark it ships (fixtures/swe/mini.jsonl and its repositories'
 * sources, issue 47 item 8) evaluated with the README's command; and what the package holds, file by file.
 * The trainer's environment (`npx polar setup`) is package-setup.test.ts.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { before, describe, test } from 'node:test';
import { execa } from 'execa';
import { ensureTinyModel, IM_END } from '../../scripts/make-tiny-model.ts';
import { ROOT } from '../support/cli.ts';
import { installPacked, type PackedPolar } from '../support/packed-polar.ts';

const model = join(ROOT, 'fixtures/models/tiny-qwen3-stop');
let polar: PackedPolar;

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    return statSync(full).isDirectory() ? walk(full) : [full];
  });
}

/** The README's command line that matches `re` (a fenced line, as written). */
function readmeLine(re: RegExp): string {
  const line = readFileSync(join(ROOT, 'README.md'), 'utf8')
    .split('\n')
    .find((l) => re.test(l));
  assert.ok(line, `README.md has a line matching ${re}`);
  return line;
}

describe('polar installed from its packed tarball into an empty project', () => {
  before(async () => {
    ensureTinyModel(model, { logitBias: { [IM_END]: 23 } });
    polar = await installPacked();
    // Pi, as the user installed it: on PATH
    symlinkSync(join(ROOT, 'node_modules/.bin/pi'), join(polar.harnesses, 'pi'));
  });

  test('the package holds what polar runs and the offline benchmark; no tests, no other fixtures', () => {
    const installed = join(polar.project, 'node_modules/polar-rl');
    for (const path of [
      'bin/polar',
      'src/cli.ts',
      'commands/capture.ts',
      'src/train/worker/requirements.txt',
      'fixtures/swe/mini.jsonl',
      'fixtures/swe/src/polar-fixtures/jsutil/src/chunk.js',
    ])
      assert.ok(existsSync(join(installed, path)), path);
    // every file of the package is under one of these (npm adds package.json, README.md, LICENSE)
    const allowed = [
      /^bin\//,
      /^commands\//,
      /^src\//,
      /^docs\//,
      /^fixtures\/swe\/mini\.jsonl$/,
      /^fixtures\/swe\/src\//,
      /^(harnesses\.json|CHANGELOG\.md|README\.md|LICENSE|package\.json)$/,
    ];
    const files = walk(installed).map((f) => relative(installed, f));
    const stray = files.filter(
      (f) =>
        !allowed.some((re) => re.test(f)) ||
        /(^|\/)(__pycache__|node_modules)\/|\.pyc$/.test(f) ||
        f.startsWith('src/train/worker/tests/'),
    );
    assert.deepEqual(stray, [], 'files the package should not hold');
    // the rows' repositories are all there as sources, none built
    const rows = readFileSync(join(installed, 'fixtures/swe/mini.jsonl'), 'utf8').trim().split('\n');
    for (const row of rows.map((l) => JSON.parse(l) as { repo: string }))
      assert.ok(existsSync(join(installed, 'fixtures/swe/src', row.repo)), row.repo);
    assert.ok(!existsSync(join(installed, 'fixtures/swe/repos')));
  });

  test("README's offline benchmark: npx polar eval of the shipped mini.jsonl, gold resolves every task", async () => {
    // what `npx polar setup` makes in ~/.cache/polar/python: here the clone's .venv (the same requirements.txt)
    const cache = join(polar.home, '.cache', 'polar');
    mkdirSync(cache, { recursive: true });
    symlinkSync(realpathSync(join(ROOT, '.venv')), join(cache, 'python'));
    const line = readmeLine(/^npx polar eval --dataset node_modules\/polar-rl\/fixtures\/swe\/mini\.jsonl/);
    const r = await execa('bash', ['-c', `${line} --json -q`], {
      cwd: polar.project,
      env: polar.env({ POLAR_CACHE_DIR: cache }),
      extendEnv: false,
      reject: false,
      timeout: 300_000,
    });
    assert.equal(r.exitCode, 0, String(r.stderr));
    const report = JSON.parse(String(r.stdout));
    assert.equal(report.total, 8);
    assert.equal(report.pass_at_1.mean, 1, String(r.stderr));
    assert.ok(
      existsSync(join(polar.project, 'node_modules/polar-rl/fixtures/swe/repos/polar-fixtures/textkit/.git')),
    );
  });

  test('npx polar --help', async () => {
    const r = await polar.npx(['--help']);
    assert.equal(r.exitCode, 0, String(r.stderr));
    assert.match(String(r.stdout), /Usage: polar/);
    assert.match(String(r.stdout), /setup/);
  });

  test('npx polar capture -- pi (found on PATH), offline with the tiny model; npx polar build', async () => {
    const r = await polar.npx(
      ['capture', '--model', model, '-o', 'run.jsonl', '--', 'pi', '-p', 'list the files'],
      300_000,
      { POLAR_EMBEDDED_THREADS: '1' },
    );
    assert.equal(r.exitCode, 0, String(r.stderr));
    const records = readFileSync(join(polar.project, 'run.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    const calls = records.filter((x) => x.type === 'call' && x.error === null);
    assert.ok(calls.length >= 1, String(r.stderr));
    assert.ok(calls.every((c) => c.token_exact === true));
    const build = await polar.npx(['build', 'run.jsonl', '-o', 'traj.jsonl']);
    assert.equal(build.exitCode, 0, String(build.stderr));
  });
});
