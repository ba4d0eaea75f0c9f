/**
 * polar as a user installs it (issue 31 item 8): `npm pack`, then `npm install <tarball>` into an empty
 * project, offline from npm's cache (the clone's own install filled it; --prefer-offline). Then, in that
 * project: `npx polar --help`, `npx polar capture -- pi ...` with Pi found on PATH (the user's own
 * install; here the clone's) against the embedded tiny model, and `npx polar setup`, which makes the
 * trainer's Python environment in polar's cache, where `npx polar train` then finds it.
 *
 * Slow (an npm install and a pip install of torch from the local wheel cache or mirror): set
 * POLAR_TEST_PACKAGE_SETUP=0 to skip the Python part.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { execa } from 'execa';
import { ensureTinyModel, IM_END } from '../../scripts/make-tiny-model.ts';
import { privateEnv, ROOT } from '../support/capture-run.ts';
import { smallBatch, TINY } from '../unit/train/fixtures.ts';

const work = mkdtempSync(join(tmpdir(), 'polar-package-'));
const project = join(work, 'project');
const home = join(work, 'home');
const harnesses = join(work, 'harnesses');
const model = join(ROOT, 'fixtures/models/tiny-qwen3-stop');

/** The project's environment: a private HOME, Pi on PATH, npm's own cache (where the clone's install is). */
function env(extra: Record<string, string> = {}): Record<string, string> {
  const base = privateEnv(home);
  return {
    ...base,
    // the clone's node_modules/.bin is not on this PATH: only the harness the user installed is
    PATH: [harnesses, ...(process.env.PATH ?? '').split(':').filter((p) => !p.includes('node_modules'))].join(
      ':',
    ),
    npm_config_cache: process.env.npm_config_cache ?? join(process.env.HOME ?? '/root', '.npm'),
    ONNXRUNTIME_NODE_INSTALL: 'skip',
    POLAR_OFFLINE: '1',
    POLAR_HOME: join(work, 'polar-home'),
    ...extra,
  };
}

const npx = (args: string[], timeout = 300_000, extra: Record<string, string> = {}) =>
  execa('npx', ['--no-install', 'polar', ...args], {
    cwd: project,
    env: env(extra),
    extendEnv: false,
    reject: false,
    stdin: 'ignore',
    timeout,
  });

describe('polar installed from its packed tarball into an empty project', () => {
  before(async () => {
    mkdirSync(project, { recursive: true });
    mkdirSync(harnesses, { recursive: true });
    mkdirSync(home, { recursive: true });
    // Pi, as the user installed it: on PATH
    symlinkSync(join(ROOT, 'node_modules/.bin/pi'), join(harnesses, 'pi'));
    ensureTinyModel(model, { logitBias: { [IM_END]: 23 } });
    const pack = await execa('npm', ['pack', '--ignore-scripts', '--pack-destination', work], {
      cwd: ROOT,
      reject: false,
    });
    assert.equal(pack.exitCode, 0, pack.stderr);
    const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'));
    assert.ok(tarball, 'npm pack wrote a tarball');
    writeFileSync(join(project, 'package.json'), '{"name": "my-agent-project", "private": true}\n');
    const install = await execa(
      'npm',
      ['install', '--prefer-offline', '--no-audit', '--no-fund', join(work, tarball)],
      { cwd: project, env: env(), extendEnv: false, reject: false, timeout: 900_000 },
    );
    assert.equal(install.exitCode, 0, `${install.stdout}\n${install.stderr}`);
  });

  test('the package holds what polar runs, and no tests or fixtures', () => {
    const installed = join(project, 'node_modules/polar-rl');
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
    const r = await npx(['--help']);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.match(r.stdout, /Usage: polar/);
    assert.match(r.stdout, /setup/);
  });

  test('npx polar capture -- pi (found on PATH), offline with the tiny model', async () => {
    const r = await npx(
      ['capture', '--model', model, '-o', 'run.jsonl', '--', 'pi', '-p', 'list the files'],
      300_000,
      { POLAR_EMBEDDED_THREADS: '1' },
    );
    assert.equal(r.exitCode, 0, r.stderr);
    const records = readFileSync(join(project, 'run.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    const calls = records.filter((x) => x.type === 'call' && x.error === null);
    assert.ok(calls.length >= 1, r.stderr);
    assert.ok(calls.every((c) => c.token_exact === true));
    const build = await npx(['build', 'run.jsonl', '-o', 'traj.jsonl']);
    assert.equal(build.exitCode, 0, build.stderr);
  });

  test(
    "npx polar setup makes the trainer's Python in polar's cache; polar train finds it",
    { skip: process.env.POLAR_TEST_PACKAGE_SETUP === '0' ? 'POLAR_TEST_PACKAGE_SETUP=0' : false },
    async () => {
      const setup = await npx(['setup', '-q'], 1_500_000);
      assert.equal(setup.exitCode, 0, setup.stderr);
      const python = join(work, 'polar-home', 'python', 'bin', 'python');
      assert.equal(setup.stdout.trim(), python);
      assert.match(setup.stderr, /polar's Python: .*torch 2\./);
      // polar train looks there first (an installed polar has no .venv beside it; no POLAR_PYTHON)
      const traj = join(project, 'batch.jsonl');
      writeFileSync(
        traj,
        smallBatch()
          .map((r) => `${JSON.stringify(r)}\n`)
          .join(''),
      );
      const train = await npx(['train', traj, '--model', TINY, '--device', 'cpu', '--out', 'ckpt'], 600_000);
      // the batch's logprobs are made up: the worker, started from that Python, refuses it (exit 3)
      assert.equal(train.exitCode, 3, train.stderr);
      assert.match(train.stderr, /training refused: .* sampled from another model/);
      const config = JSON.parse(readFileSync(join(project, 'ckpt', 'config.json'), 'utf8'));
      assert.equal(config.environment.python, python);
    },
  );
});
