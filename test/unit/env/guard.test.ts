import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { GUARD_HOOK, guardReport, judgeGuard, testProgram } from '../../../src/rollout/env/guard.ts';
import { tempDir } from '../../support/temp.ts';

const places = { log: '/s/guard.log', tree: '/s/repo', layer: '/s/polar-env', program: 'pytest' };
const context = { ...places, envDir: '/cache/env', passed: true, install: 'python -m pip install -e .' };
const report = (records: string[], names: string[], program = '/s/polar-env/bin/pytest') =>
  [
    ...records,
    '@@polar-guard-names',
    ...names,
    '@@polar-guard-roots',
    '/s/repo',
    '/s/polar-env',
    '@@polar-guard-program',
    program,
    '',
  ].join('\n');

test('testProgram: the first word of a test command after VAR=value assignments', () => {
  assert.equal(testProgram('pytest -rA'), 'pytest');
  assert.equal(
    testProgram("PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"),
    'bin/test',
  );
  assert.equal(testProgram('env A=1 python -m pytest'), 'python');
  assert.equal(testProgram('./tests/runtests.py --verbosity 2'), './tests/runtests.py');
  assert.equal(testProgram(''), null);
});

test('guard: imports from the tree or the layer pass; one from elsewhere is an error naming both paths', () => {
  assert.equal(judgeGuard(report(['_pytest\t/s/repo/src/_pytest/__init__.py'], ['_pytest']), context), null);
  assert.equal(
    judgeGuard(
      report(['django\t/s/polar-env/lib/python3.5/site-packages/Django.egg/django/__init__.py'], ['django']),
      context,
    ),
    null,
  );
  const v = judgeGuard(
    report(
      [
        'pytest\t/s/repo/src/pytest/__init__.py',
        '_pytest\t/cache/env/lib/python3.9/site-packages/_pytest/__init__.py',
      ],
      ['_pytest', 'pytest'],
    ),
    context,
  );
  assert.ok(v);
  assert.match(
    v.message,
    /imported _pytest from \/cache\/env\/lib\/python3\.9\/site-packages\/_pytest\/__init__\.py/,
  );
  assert.match(v.message, /sample's tree \/s\/repo/);
  // a built-in or namespace origin is not in the tree either
  assert.ok(judgeGuard(report(['x\tbuilt-in'], ['x']), context));
  assert.ok(judgeGuard(report(['x\t/s/repo/x;/elsewhere/x'], ['x']), context));
  // a prefix of the tree's path is not the tree
  assert.ok(judgeGuard(report(['x\t/s/repo2/x/__init__.py'], ['x']), context));
});

test('guard: no import recorded is an error when a test passed, or when the program is outside the environment', () => {
  // the program resolves in the layer, nothing passed: the model's code may have broken the run
  assert.equal(judgeGuard(report([], ['minitest']), { ...context, passed: false }), null);
  // something passed with no Python of the environment seen
  assert.match(
    judgeGuard(report([], ['minitest']), context)?.message ?? '',
    /ran a Python outside the environment/,
  );
  // pytest further down PATH (pytest-dev__pytest-7432): an error even though nothing passed
  const shim = judgeGuard(report([], ['_pytest', 'pytest'], '/root/.pyenv/shims/pytest'), {
    ...context,
    passed: false,
  });
  assert.match(
    shim?.message ?? '',
    /test command's pytest is \/root\/\.pyenv\/shims\/pytest, outside the environment/,
  );
  assert.match(
    judgeGuard(report([], ['x'], '(not found)'), { ...context, passed: false })?.message ?? '',
    /\(not found\)/,
  );
  // the program in the cached environment, or a script of the tree: fine
  assert.equal(judgeGuard(report([], ['x'], '/cache/env/bin/tox'), { ...context, passed: false }), null);
  assert.equal(judgeGuard(report([], ['x'], '/s/repo/bin/test'), { ...context, passed: false }), null);
  // a tree with no package: nothing to check
  assert.equal(judgeGuard(report([], [], '/usr/bin/node'), context), null);
});

test('guardReport prints the records, the tree packages, the roots and the program, in that order', () => {
  const dir = tempDir('polar-guard-');
  const tree = join(dir, 'repo');
  mkdirSync(join(tree, 'src', 'pkg'), { recursive: true });
  mkdirSync(join(tree, 'top'), { recursive: true });
  mkdirSync(join(tree, 'docs'), { recursive: true });
  writeFileSync(join(tree, 'src', 'pkg', '__init__.py'), '');
  writeFileSync(join(tree, 'top', '__init__.py'), '');
  writeFileSync(join(dir, 'guard.log'), 'pkg\t/x\n');
  const script = guardReport({
    log: join(dir, 'guard.log'),
    tree,
    layer: join(dir, 'layer'),
    program: 'bin/test',
  });
  const out = spawnSync('bash', ['-c', script], { encoding: 'utf8' }).stdout;
  assert.deepEqual(out.trim().split('\n'), [
    'pkg\t/x',
    '@@polar-guard-names',
    'top',
    'pkg',
    '@@polar-guard-roots',
    tree,
    join(dir, 'layer'),
    '@@polar-guard-program',
    join(tree, 'bin/test'),
  ]);
});

test('the hook records where each package of the tree is imported from, and is inert without its variables', () => {
  const dir = tempDir('polar-guard-hook-');
  const tree = join(dir, 'repo');
  const elsewhere = join(dir, 'site');
  mkdirSync(join(tree, 'src', 'pkg'), { recursive: true });
  writeFileSync(join(tree, 'src', 'pkg', '__init__.py'), '');
  mkdirSync(join(elsewhere, 'pkg'), { recursive: true });
  writeFileSync(join(elsewhere, 'pkg', '__init__.py'), '');
  writeFileSync(join(elsewhere, '_polar_guard.py'), GUARD_HOOK);
  const log = join(dir, 'guard.log');
  const run = (env: Record<string, string>) =>
    spawnSync('python3', ['-c', 'import _polar_guard, json, pkg, pkg; import os'], {
      env: { ...process.env, PYTHONPATH: elsewhere, ...env },
      encoding: 'utf8',
    });
  assert.equal(run({}).status, 0);
  assert.throws(() => readFileSync(log));
  const r = run({ POLAR_GUARD_LOG: log, POLAR_GUARD_TREE: tree });
  assert.equal(r.status, 0, r.stderr);
  // json is not a package of the tree; pkg is recorded once, where it really came from
  assert.equal(readFileSync(log, 'utf8'), `pkg\t${join(elsewhere, 'pkg', '__init__.py')}\n`);
});
