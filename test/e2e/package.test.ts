/**
 * polar installed from its packed tarball into an empty project (issue 31 item 8;
 * test/support/packed-polar.ts): `npx polar --help`, and `npx polar capture -- pi ...` with Pi found on
 * PATH (the user's own install; here the clone's) against the embedded tiny model, offline, then
 * `npx polar build`. The trainer's environment (`npx polar setup`) is package-setup.test.ts.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { ensureTinyModel, IM_END } from '../../scripts/make-tiny-model.ts';
import { ROOT } from '../support/cli.ts';
import { installPacked, type PackedPolar } from '../support/packed-polar.ts';

const model = join(ROOT, 'fixtures/models/tiny-qwen3-stop');
let polar: PackedPolar;

describe('polar installed from its packed tarball into an empty project', () => {
  before(async () => {
    ensureTinyModel(model, { logitBias: { [IM_END]: 23 } });
    polar = await installPacked();
    // Pi, as the user installed it: on PATH
    symlinkSync(join(ROOT, 'node_modules/.bin/pi'), join(polar.harnesses, 'pi'));
  });

  test('the package holds what polar runs, and no tests or fixtures', () => {
    const installed = join(polar.project, 'node_modules/polar-rl');
    for (const path of [
      'bin/polar',
      'src/cli.ts',
      'commands/capture.ts',
      'src/train/worker/requirements.txt',
    ])
      assert.ok(existsSync(join(installed, path)), path);
    for (const path of ['test', 'fixtures', 'bench', 'src/train/worker/tests'])
      assert.ok(!existsSync(join(installed, path)), path);
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
