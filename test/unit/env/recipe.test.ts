import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { SweInstance } from '../../../src/rollout/dataset.ts';
import { envKey, envName, pipFailure } from '../../../src/rollout/env/build.ts';
import { findPython, pythonCandidates } from '../../../src/rollout/env/python.ts';
import { recipeFor, wantsEnvironment } from '../../../src/rollout/env/recipe.ts';
import { EnvBuildError } from '../../../src/rollout/env/types.ts';
import { tempDir } from '../../support/temp.ts';

const row = (over: Partial<SweInstance>): SweInstance => ({
  instance_id: 'x__y-1',
  repo: 'x/y',
  base_commit: 'abc1234',
  patch: '',
  test_patch: '',
  problem_statement: '',
  hints_text: '',
  created_at: '',
  version: '1.0',
  FAIL_TO_PASS: ['t'],
  PASS_TO_PASS: [],
  ...over,
});

/** a repository with one commit holding `files`; returns its path and the commit */
function repoWith(files: Record<string, string>): { dir: string; commit: string } {
  const dir = tempDir('polar-recipe-');
  const git = (...args: string[]) =>
    execFileSync('git', args, {
      cwd: dir,
      encoding: 'utf8',
      env: {
        ...process.env,
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_AUTHOR_NAME: 't',
        GIT_AUTHOR_EMAIL: 't@t',
        GIT_COMMITTER_NAME: 't',
        GIT_COMMITTER_EMAIL: 't@t',
      },
    });
  git('init', '-q');
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  git('add', '-A');
  git('commit', '-qm', 'base');
  return { dir, commit: git('rev-parse', 'HEAD').trim() };
}

test('an official row: the v4.1.0 recipe (pytest 5.4: Python 3.9, its pins, pip install -e .)', async () => {
  const r = await recipeFor(row({ repo: 'pytest-dev/pytest', version: '5.4' }), '/nonexistent');
  assert.ok(r);
  assert.equal(r.source, 'swebench-v4.1.0');
  assert.equal(r.python, '3.9');
  assert.deepEqual(r.pipPackages, [
    'py==1.11.0',
    'packaging==23.1',
    'attrs==23.1.0',
    'more-itertools==10.1.0',
    'pluggy==0.13.1',
  ]);
  assert.deepEqual(r.requirements, []);
  assert.equal(r.install, 'python -m pip install -e .');
  assert.equal(await recipeFor(row({}), '/nonexistent'), null);
  assert.equal(wantsEnvironment(row({})), false);
  assert.equal(wantsEnvironment(row({ repo: 'pytest-dev/pytest', version: '5.4' })), true);
});

test('requirements.txt is read from the repository at environment_setup_commit, as get_requirements_by_commit reads it', async () => {
  const { dir, commit } = repoWith({
    'tests/requirements/py3.txt':
      '-r ../../requirements/base.txt\n# a comment\n-e .\nasgiref >= 3.2\n.[test]\ntypes-pkg_resources==0.1\n',
    'requirements/base.txt': 'pytz\n',
  });
  const r = await recipeFor(
    row({ repo: 'django/django', version: '3.0', base_commit: '0000000', environment_setup_commit: commit }),
    dir,
  );
  assert.ok(r);
  assert.deepEqual(r.requirements, ['pytz', 'asgiref >= 3.2', 'types-setuptools']);
  assert.equal(r.requirementsFrom, `${commit}:tests/requirements/py3.txt`);
  assert.equal(r.python, '3.6');
  await assert.rejects(
    recipeFor(row({ repo: 'pylint-dev/pylint', version: '2.13', base_commit: commit }), dir),
    (e: unknown) => e instanceof EnvBuildError && /requirements_test\.txt/.test(e.message),
  );
});

test("a row's own fields win over the official ones; machine-changing pre_install steps are set apart", async () => {
  const r = await recipeFor(
    row({
      repo: 'pytest-dev/pytest',
      version: '5.4',
      python: '3.11',
      pip_packages: ['pluggy'],
      install: 'make',
    }),
    '/nonexistent',
  );
  assert.ok(r);
  assert.equal(r.source, 'row');
  assert.deepEqual([r.python, r.pipPackages, r.install], ['3.11', ['pluggy'], 'make']);
  const django = await recipeFor(
    row({ repo: 'django/django', version: '2.2', pip_packages: [] }),
    '/nonexistent',
  );
  assert.ok(django);
  assert.deepEqual(django.preInstall, []);
  assert.deepEqual(django.systemSteps, [
    'apt-get update && apt-get install -y locales',
    "echo 'en_US UTF-8' > /etc/locale.gen",
    'locale-gen en_US.UTF-8',
  ]);
  const sphinx = await recipeFor(row({ repo: 'sphinx-doc/sphinx', version: '7.2' }), '/nonexistent');
  assert.deepEqual(sphinx?.preInstall, ["sed -i 's/pytest/pytest -rA/' tox.ini"]);
  assert.deepEqual(sphinx?.systemSteps, ['apt-get update && apt-get install -y graphviz']);
});

test("a pip failure is said in polar's words: a requirement polar asked for is named, pip's text is not echoed", () => {
  assert.equal(
    pipFailure(
      'ERROR: Could not find a version that satisfies the requirement pluggy==0.13.1 (from versions: 1.6.0)\nERROR: No matching distribution found for pluggy==0.13.1\n',
      ['pytest', 'pluggy==0.13.1'],
    ),
    'pip cannot install pluggy==0.13.1 (versions it can find: 1.6.0)',
  );
  assert.equal(
    pipFailure(
      'ERROR: Could not find a version that satisfies the requirement x (from versions: )\nERROR: No matching distribution found for x',
      ['x'],
    ),
    'pip cannot install x (versions it can find: none)',
  );
  // what pip names but polar did not ask for (a file pip read: `-r /root/secret` did this) is not repeated
  const leak =
    'ERROR: Could not find a version that satisfies the requirement polar-secret-line (from -r /root/secret (line 1)) (from versions: none)\nERROR: No matching distribution found for polar-secret-line';
  assert.equal(
    pipFailure(leak, ['-r', '/root/secret']),
    'pip cannot install a dependency of the requirements (the build log names it)',
  );
  assert.doesNotMatch(pipFailure(leak), /secret/);
  assert.match(
    pipFailure(
      'ERROR: Cannot install a and b\n\nThe conflict is caused by:\n    a 1 depends on c<1\n    b 1 depends on c>2\n',
    ),
    /^pip found conflicting requirements: a 1 depends on c<1; b 1 depends on c>2$/,
  );
  assert.equal(
    pipFailure("ERROR: Package 'flake8' requires a different Python: 3.9.18 not in '>=3.10'"),
    'flake8 requires a different Python (3.9.18 is not >=3.10)',
  );
  for (const [output, cause] of [
    ["ERROR: Invalid requirement: 'root:x:0:0:root:/root:/bin/bash'", 'pip failed'],
    [
      '  error: subprocess-exited-with-error\n× Getting requirements to build wheel did not run successfully.',
      'a package failed to build',
    ],
    [
      "WARNING: Retrying ... Failed to establish a new connection: [Errno 101] Network is unreachable'",
      'pip could not reach',
    ],
  ])
    assert.ok(pipFailure(output!).startsWith(cause!), `${output} -> ${pipFailure(output!)}`);
  assert.doesNotMatch(pipFailure("ERROR: Invalid requirement: 'root:x:0:0:root:/root:/bin/bash'"), /root/);
});

test('the key changes with what builds the environment, and only with that', async () => {
  const r = await recipeFor(row({ repo: 'pytest-dev/pytest', version: '5.4' }), '/nonexistent');
  assert.ok(r);
  const py = { executable: '/usr/bin/python3.9', version: '3.9.18', prefix: '/usr' };
  const k = envKey(r, py);
  assert.equal(envKey({ ...r, install: 'other', preInstall: ['x'] }, py), k); // per-sample steps
  assert.notEqual(envKey({ ...r, pipPackages: [...r.pipPackages, 'x'] }, py), k);
  assert.notEqual(envKey({ ...r, requirements: ['x'] }, py), k);
  assert.notEqual(envKey(r, { ...py, version: '3.9.19' }), k);
  assert.notEqual(envKey(r, { ...py, executable: '/opt/python3.9' }), k);
  // sympy 1.1, 1.7 and 1.12 read alike: each version its own environment, named by it
  const sympy = async (version: string) =>
    (await recipeFor(row({ repo: 'sympy/sympy', version }), '/nonexistent'))!;
  const [v17, v112] = [await sympy('1.7'), await sympy('1.12')];
  assert.deepEqual({ ...v17, version: '' }, { ...v112, version: '' });
  assert.notEqual(envKey(v17, py), envKey(v112, py));
  assert.match(envName(v112, envKey(v112, py)), /^sympy__sympy-1\.12-[0-9a-f]{12}$/);
});

test('Python X.Y is looked for on PATH (not in pyenv shims), in pyenv versions, newest patch first', () => {
  const dir = tempDir('polar-pythons-');
  const mk = (path: string) => {
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, '#!/bin/sh\n');
    chmodSync(path, 0o755);
    return path;
  };
  const onPath = mk(join(dir, 'bin', 'python3.7'));
  mk(join(dir, 'shims', 'python3.7'));
  const old = mk(join(dir, 'pyenv', 'versions', '3.7.2', 'bin', 'python3.7'));
  const newer = mk(join(dir, 'pyenv', 'versions', '3.7.16', 'bin', 'python3.7'));
  mk(join(dir, 'pyenv', 'versions', '3.17.1', 'bin', 'python3.17'));
  const found = pythonCandidates('3.7', {
    PATH: `${join(dir, 'shims')}:${join(dir, 'bin')}`,
    PYENV_ROOT: join(dir, 'pyenv'),
  });
  assert.deepEqual(found.slice(0, 3), [onPath, newer, old]);
});

test('a Python version that is not on the machine is an error naming it and the way out', async () => {
  await assert.rejects(
    findPython({ spec: '2.1', for: 'the spec of x/y 1.0' }),
    (e: unknown) =>
      e instanceof EnvBuildError &&
      /Python 2\.1 \(the spec of x\/y 1\.0\) is not on this machine/.test(e.message) &&
      /--env-python 2\.1=/.test(e.hint ?? ''),
  );
  const py = await findPython({ spec: null, for: 'a row' });
  assert.match(py.version, /^3\./);
  const mapped = await findPython({ spec: '2.1', for: 'x' }, { '2.1': py.executable });
  assert.equal(mapped.executable, py.executable);
});
