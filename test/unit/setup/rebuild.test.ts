/**
 * `polar setup --python X` over an environment that is there (issue 47 item 9): X is checked (a missing
 * one is exit 4, as when there is no environment), an environment made by another interpreter is refused
 * naming both and --rebuild (it used to be installed into, --python ignored), the same interpreter
 * installs into it, and --rebuild makes it again with X. The installs here fail fast on purpose (pip
 * without an index: exit 4): what is checked is the environment polar kept or made before pip ran.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { runPolar } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';

/** A Python's base interpreter (real path) and version, or null when it does not run or is older than 3.10. */
function identify(python: string): { python: string; base: string; version: string } | null {
  try {
    const out = execFileSync(
      python,
      [
        '-c',
        'import os, sys, venv; print(os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)); print("%d.%d.%d" % sys.version_info[:3])',
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
    );
    const [base, version] = out.trim().split('\n');
    const [major, minor] = version!.split('.').map(Number);
    return major === 3 && minor! >= 10 ? { python, base: base!, version: version! } : null;
  } catch {
    return null;
  }
}

/** Two Pythons 3.10+ that are different interpreters (PATH, /usr/bin, pyenv's versions), or none. */
function twoPythons():
  | [NonNullable<ReturnType<typeof identify>>, NonNullable<ReturnType<typeof identify>>]
  | null {
  const pyenv = process.env.PYENV_ROOT ? join(process.env.PYENV_ROOT, 'versions') : null;
  const candidates = [
    'python3',
    '/usr/bin/python3',
    'python3.10',
    'python3.11',
    'python3.12',
    'python3.13',
    ...(pyenv && existsSync(pyenv) ? readdirSync(pyenv).map((v) => join(pyenv, v, 'bin', 'python3')) : []),
  ];
  const found = new Map<string, NonNullable<ReturnType<typeof identify>>>();
  for (const c of candidates) {
    const id = identify(c);
    if (id && !found.has(id.base)) found.set(id.base, id);
    if (found.size === 2) break;
  }
  const [a, b] = [...found.values()];
  return a && b ? [a, b] : null;
}

const pythons = twoPythons();
// pip with no index and no mirror: an install fails at once, after polar kept or made the environment
const NO_INDEX = { PIP_CONFIG_FILE: '/dev/null', PIP_NO_INDEX: '1', PIP_FIND_LINKS: '' };

describe(
  'polar setup --python over an environment that is there',
  { skip: pythons ? false : 'needs two Pythons 3.10+' },
  () => {
    let dir: string;
    let venv: string;
    const cfg = () => readFileSync(join(venv, 'pyvenv.cfg'), 'utf8');
    const setup = (args: string[]) =>
      runPolar(['setup', '--venv', venv, ...args], { env: NO_INDEX, timeoutMs: 300_000 });

    before(() => {
      dir = tempDir('polar-setup-');
      venv = join(dir, 'venv');
      execFileSync(pythons![0].python, ['-m', 'venv', '--without-pip', venv]);
    });

    test('a --python that is not there: exit 4, the environment left as it was', async () => {
      const was = cfg();
      const r = await setup(['--python', join(dir, 'no-python3')]);
      assert.equal(r.code, 4, r.stderr);
      assert.match(r.stderr, /no .*no-python3 found/);
      assert.equal(cfg(), was);
    });

    test('another interpreter: refused (exit 2), naming both and --rebuild; nothing installed', async () => {
      const [a, b] = pythons!;
      const was = cfg();
      const r = await setup(['--python', b.python]);
      assert.equal(r.code, 2, r.stderr);
      assert.ok(r.stderr.includes(`was made by ${a.base} (Python ${a.version})`), r.stderr);
      assert.ok(r.stderr.includes(`not by --python ${b.python} (${b.base}, Python ${b.version})`), r.stderr);
      assert.match(r.stderr, /add --rebuild to remove it and make it again/);
      assert.doesNotMatch(r.stderr, /installing/);
      assert.equal(cfg(), was);
    });

    test('the same interpreter: installed into as it is', async () => {
      const was = cfg();
      const r = await setup(['--python', pythons![0].python]);
      assert.match(r.stderr, /installing .*requirements\.txt into/, r.stderr);
      assert.equal(r.code, 4, 'pip had no index');
      assert.equal(cfg(), was, 'not made again');
    });

    test('--rebuild: removed and made again with --python', async () => {
      const [a, b] = pythons!;
      writeFileSync(join(venv, 'left-over'), 'x');
      const r = await setup(['--python', b.python, '--rebuild']);
      assert.match(
        r.stderr,
        new RegExp(`--rebuild: removing .* \\(made by ${a.base.replace(/[.]/g, '\\.')}`),
        r.stderr,
      );
      assert.match(r.stderr, /installing/, r.stderr);
      assert.equal(r.code, 4, 'pip had no index');
      assert.ok(!existsSync(join(venv, 'left-over')), 'the old environment is gone');
      assert.equal(realpathSync(join(venv, 'bin', 'python')), realpathSync(b.base));
    });

    test('a folder that is not a virtual environment is never removed', async () => {
      const other = join(dir, 'mine');
      mkdirSync(other);
      writeFileSync(join(other, 'notes.txt'), 'keep me');
      const r = await runPolar(['setup', '--venv', other, '--python', pythons![1].python, '--rebuild'], {
        env: NO_INDEX,
      });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /is there and is not a Python virtual environment/);
      assert.equal(readFileSync(join(other, 'notes.txt'), 'utf8'), 'keep me');
    });
  },
);
