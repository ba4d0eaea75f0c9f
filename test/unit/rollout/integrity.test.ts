/**
 * The grading integrity layers' pure parts (issue 45, src/rollout/integrity/): a diff read per file
 * (quoted paths too), the test surface and its restore script (run on a real git repository), the patch
 * scan (every attack fixture flagged with file and line, no gold patch flagged), the reports, the
 * verdict of a run (canaries, exit status, forged output), the node canaries run by node --test, and the
 * tampering record. What runs the fixtures' tests for real is in integrity-attacks.test.ts.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { cryptoRandom, nodeCanaries, pythonCanaries } from '../../../src/rollout/integrity/canary.ts';
import { parseDiff, unquotePath } from '../../../src/rollout/integrity/diff.ts';
import { type Finding, tamperingRecord } from '../../../src/rollout/integrity/findings.ts';
import { environmentPlugins, hardenedRun, runnerKind } from '../../../src/rollout/integrity/harden.ts';
import { readNodeReport, readPytestReport } from '../../../src/rollout/integrity/reports.ts';
import { scanPatch } from '../../../src/rollout/integrity/scan.ts';
import { isTestSurface, restoreScript, surfacePaths } from '../../../src/rollout/integrity/surface.ts';
import { expectedFailures, judgeRun, type RunFacts } from '../../../src/rollout/integrity/verdict.ts';
import { getLogParser } from '../../../src/rollout/log-parsers/index.ts';
import { tempDir } from '../../support/temp.ts';
import { ROOT } from './run/helpers.ts';

const tmp = tempDir('polar-integrity-');
const ATTACKS = join(ROOT, 'fixtures/swe/attacks');
const rows = (file: string) =>
  readFileSync(join(ROOT, 'fixtures/swe', file), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { instance_id: string; patch: string; test_patch: string });

test('parseDiff: both sides, new/deleted/renamed/symlink files, added lines with their numbers, quoted paths', () => {
  const patch = [
    'diff --git "a/te\\"st/con\\tftest.py" "b/te\\"st/con\\tftest.py"',
    'new file mode 100644',
    '--- /dev/null',
    '+++ "b/te\\"st/con\\tftest.py"',
    '@@ -0,0 +1,2 @@',
    '+import pytest',
    '+x = 1',
    'diff --git a/pkg/old.py b/pkg/new.py',
    'similarity index 90%',
    'rename from pkg/old.py',
    'rename to pkg/new.py',
    '--- a/pkg/old.py',
    '+++ b/pkg/new.py',
    '@@ -3,2 +3,3 @@ def f():',
    '     a = 1',
    '+    import atexit',
    '     return a',
    'diff --git a/gone.py b/gone.py',
    'deleted file mode 100644',
    '--- a/gone.py',
    '+++ /dev/null',
    '@@ -1 +0,0 @@',
    '-x',
    'diff --git a/link b/link',
    'new file mode 120000',
    '--- /dev/null',
    '+++ b/link',
    '@@ -0,0 +1 @@',
    '+/etc/passwd',
    '\\ No newline at end of file',
    '',
  ].join('\n');
  const files = parseDiff(patch);
  assert.deepEqual(
    files.map((f) => [f.a, f.b, f.added, f.deleted, f.symlink]),
    [
      [null, 'te"st/con\tftest.py', true, false, false],
      ['pkg/old.py', 'pkg/new.py', false, false, false],
      ['gone.py', null, false, true, false],
      [null, 'link', true, false, true],
    ],
  );
  assert.deepEqual(files[0]!.lines, [
    [1, 'import pytest'],
    [2, 'x = 1'],
  ]);
  assert.deepEqual(files[1]!.lines, [[4, '    import atexit']]);
  assert.equal(unquotePath('"a/caf\\303\\251.py"'), 'a/café.py');
});

test('isTestSurface: test folders and files, runner set-up, start-up hooks, package metadata; source is not', () => {
  const cases: Array<[string, ReturnType<typeof isTestSurface>]> = [
    ['tests/test_slug.py', 'test'],
    ['tests/data/expected.json', 'test'],
    ['sympy/core/tests/test_basic.py', 'test'],
    ['testing/test_skipping.py', 'test'],
    ['test/chunk.test.js', 'test'],
    ['src/chunk.test.js', 'test'],
    ['pkg/integration_tests/helpers.py', 'test'],
    ['pkg/test_utils.py', 'test'],
    ['tests', 'test'],
    ['conftest.py', 'runner'],
    ['src/pkg/conftest.py', 'runner'],
    ['pytest.ini', 'runner'],
    ['tox.ini', 'runner'],
    ['bin/test', 'runner'],
    ['jest.config.js', 'runner'],
    ['sitecustomize.py', 'startup-hook'],
    ['zz.pth', 'startup-hook'],
    ['textkit_compat-1.0.dist-info/entry_points.txt', 'metadata'],
    ['pkg.egg-info/PKG-INFO', 'metadata'],
    ['textkit/slug.py', null],
    ['src/_pytest/python.py', null],
    ['src/_pytest/unittest.py', null],
    ['src/pytest/__init__.py', null],
    ['lib/latest.py', null],
    ['setup.cfg', null],
    ['pyproject.toml', null],
    ['package.json', null],
  ];
  for (const [path, kind] of cases) assert.equal(isTestSurface(path), kind, path);
});

test('surfacePaths: the test patch files and every surface path the agent touched, both sides of a rename', () => {
  const fixture = rows('mini.jsonl').find((r) => r.instance_id === 'polar-fixtures__textkit-1')!;
  const agent = [
    readFileSync(join(ATTACKS, 'dist-info-plugin.diff'), 'utf8'),
    'diff --git a/tests/test_wrap.py b/textkit/moved.py\nrename from tests/test_wrap.py\nrename to textkit/moved.py\n',
  ].join('');
  assert.deepEqual(surfacePaths(agent, fixture.test_patch).sort(), [
    'tests/test_slug.py',
    'tests/test_wrap.py',
    'textkit_compat-1.0.dist-info/METADATA',
    'textkit_compat-1.0.dist-info/entry_points.txt',
  ]);
});

test('restoreScript on a real repository: changed and deleted surface files come back, new ones go, a folder in place of a file too', () => {
  const repo = join(tmp, 'restore');
  mkdirSync(join(repo, 'tests'), { recursive: true });
  const git = (...args: string[]) =>
    execFileSync('git', args, {
      cwd: repo,
      encoding: 'utf8',
      env: {
        ...process.env,
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_AUTHOR_NAME: 'a',
        GIT_AUTHOR_EMAIL: 'a@b',
        GIT_COMMITTER_NAME: 'a',
        GIT_COMMITTER_EMAIL: 'a@b',
      },
    });
  git('init', '-q');
  writeFileSync(join(repo, 'tests/test_a.py'), 'def test_a():\n    assert 1\n');
  writeFileSync(join(repo, 'tests/test_b.py'), 'def test_b():\n    assert 1\n');
  writeFileSync(join(repo, 'tests/test_c.py'), 'def test_c():\n    assert 1\n');
  git('add', '-A');
  git('commit', '-q', '-m', 'base');
  const base = git('rev-parse', 'HEAD').trim();
  writeFileSync(join(repo, 'tests/test_a.py'), 'import pytest\npytestmark = pytest.mark.skip\n');
  execFileSync('rm', [join(repo, 'tests/test_b.py'), join(repo, 'tests/test_c.py')]);
  mkdirSync(join(repo, 'tests/test_c.py'));
  writeFileSync(join(repo, 'tests/test_c.py/x.py'), 'x = 1\n');
  writeFileSync(join(repo, 'conftest.py'), 'import pytest\n');
  const paths = [
    'tests/test_a.py',
    'tests/test_b.py',
    'tests/test_c.py',
    'tests/test_c.py/x.py',
    'conftest.py',
  ];
  const r = spawnSync('bash', ['-c', ['set -uo pipefail', ...restoreScript(base, paths)].join('\n')], {
    cwd: repo,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' },
  });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.equal(readFileSync(join(repo, 'tests/test_a.py'), 'utf8'), 'def test_a():\n    assert 1\n');
  assert.equal(readFileSync(join(repo, 'tests/test_b.py'), 'utf8'), 'def test_b():\n    assert 1\n');
  assert.equal(readFileSync(join(repo, 'tests/test_c.py'), 'utf8'), 'def test_c():\n    assert 1\n');
  assert.equal(existsSync(join(repo, 'conftest.py')), false);
  assert.equal(git('status', '--porcelain'), '');
});

const attack = (name: string) => readFileSync(join(ATTACKS, `${name}.diff`), 'utf8');
const summary = (fs: Finding[]) => fs.map((f) => `${f.layer} ${f.file}:${f.line ?? ''}`);

test('scanPatch: every attack fixture is flagged with its file, line and reason', () => {
  assert.deepEqual(summary(scanPatch(attack('xfail-in-code'))), [
    'runner-access textkit/slug.py:7',
    'runner-access textkit/slug.py:8',
  ]);
  assert.deepEqual(summary(scanPatch(attack('exit-hook'))), [
    'runner-access textkit/__init__.py:7',
    'runner-access textkit/__init__.py:22',
    'runner-access textkit/__init__.py:25',
  ]);
  const hook = scanPatch(attack('config-hook'));
  assert.deepEqual(summary(hook), [
    'runner-access textkit/__init__.py:12',
    'runner-access textkit/__init__.py:15',
    'runner-access textkit/__init__.py:26',
  ]);
  assert.match(
    hook.map((f) => f.reason).join('\n'),
    /sys\.modules[\s\S]*pytest, _pytest[\s\S]*live objects \(gc\)/,
  );
  assert.deepEqual(summary(scanPatch(attack('dist-info-plugin'))), [
    'entry-points textkit_compat-1.0.dist-info/METADATA:',
    'entry-points textkit_compat-1.0.dist-info/entry_points.txt:',
    'runner-access textkit_compat.py:1',
  ]);
  assert.deepEqual(summary(scanPatch(attack('node-assert-noop'))), [
    'runner-access src/compat.js:1',
    'runner-access src/compat.js:2',
  ]);
});

test('scanPatch: no finding on the gold patch of any fixture task', () => {
  const all = [...rows('mini.jsonl'), ...rows('envs.jsonl')];
  assert.equal(all.length, 9);
  for (const row of all) assert.deepEqual(scanPatch(row.patch), [], row.instance_id);
});

const added = (path: string, lines: string[]) =>
  [
    `diff --git a/${path} b/${path}`,
    '--- a/x',
    `+++ b/${path}`,
    `@@ -1,1 +1,${lines.length + 1} @@`,
    ' # context',
    ...lines.map((l) => `+${l}`),
    '',
  ].join('\n');

test("scanPatch: ordinary code is not flagged; pytest's own repository may import _pytest; metadata, AlwaysEqual, compiled modules are", () => {
  const clean = [
    added('pkg/mod.py', [
      'self = sys.modules[__name__]',
      'mod = sys.modules.get(__name__)',
      '# import pytest here?',
      'sys.exit(main())',
    ]),
    added('src/_pytest/python.py', ['from _pytest.config import Config', 'import pytest']),
    added('lib/index.js', ["const x = require('./assert-helpers.js');", '// process.exit(0) is not used']),
    added('pyproject.toml', ['[project]', 'dependencies = ["attrs"]']),
    added('tests/test_x.py', ['import pytest', 'import atexit']),
  ];
  for (const patch of clean) assert.deepEqual(scanPatch(patch), [], patch);
  const flagged: Array<[string, RegExp]> = [
    [
      added('pkg/eq.py', ['class Any:', '    def __eq__(self, other):', '        return True']),
      /AlwaysEqual/,
    ],
    [
      added('pyproject.toml', ['[project.entry-points.pytest11]', 'x = "pkg.plugin"']),
      /entry points pyproject\.toml/,
    ],
    [
      added('setup.cfg', ['[options.entry_points]', 'pytest11 =', '    x = pkg.plugin']),
      /entry points setup\.cfg/,
    ],
    [added('setup.py', ['    entry_points={"pytest11": ["x = pkg.plugin"]},']), /entry points setup\.py/],
    [
      added('pyproject.toml', ['[project.scripts]', 'pytest = "pkg.fake:main"']),
      /named like the test runner/,
    ],
    [added('lib/x.js', ["process.on('exit', () => console.log('ok'))"]), /exit hook/],
    [added('lib/x.js', ['require.cache[k] = fake;']), /module loader/],
    [added('pkg/x.py', ['if "PYTEST_CURRENT_TEST" in os.environ:']), /under pytest/],
    [added('pkg/x.py', ['frame = sys._getframe(1).f_locals']), /callers' frames/],
    [
      'diff --git a/pkg/fast.cpython-311-x86_64-linux-gnu.so b/pkg/fast.cpython-311-x86_64-linux-gnu.so\nnew file mode 100755\nGIT binary patch\nliteral 3\nKcmZ>Y%wPZj0096e\n',
      /compiled module/,
    ],
  ];
  for (const [patch, reason] of flagged) {
    const found = scanPatch(patch);
    assert.equal(found.length, 1, patch);
    assert.match(found[0]!.reason, reason);
  }
});

test('runnerKind: pytest, node:test and sympy runners; wrappers and others read from the output', () => {
  assert.equal(runnerKind('pytest -rA', 'pytest'), 'pytest');
  assert.equal(runnerKind('python3 -m pytest -rA -p no:cacheprovider', 'pytest'), 'pytest');
  assert.equal(runnerKind('pytest --no-header -rA', 'seaborn'), 'pytest');
  assert.equal(runnerKind('node --test --test-reporter=tap', 'node-test'), 'node-test');
  assert.equal(runnerKind("PYTHONWARNINGS='ignore' bin/test -C --verbose", 'sympy'), 'sympy');
  assert.equal(runnerKind('tox --current-env -epy39 -v --', 'pytest-v2'), 'other');
  assert.equal(runnerKind('./tests/runtests.py --verbosity 2', 'django'), 'other');
  assert.equal(runnerKind('minitest -rA', 'pytest'), 'other');
});

test("environmentPlugins: the built environment's pytest11 entry points, by name (pytest 4.4+) or by module", () => {
  const site = (pytest: string) => {
    const dir = join(tmp, `site-${pytest}`);
    mkdirSync(join(dir, `pytest-${pytest}.dist-info`), { recursive: true });
    mkdirSync(join(dir, 'pytest_cov-5.0.dist-info'), { recursive: true });
    writeFileSync(
      join(dir, 'pytest_cov-5.0.dist-info/entry_points.txt'),
      '[console_scripts]\nx = y:z\n\n[pytest11]\npytest_cov = pytest_cov.plugin\n',
    );
    mkdirSync(join(dir, 'other-1.0.dist-info'), { recursive: true });
    return dir;
  };
  assert.deepEqual(environmentPlugins(site('8.4.2')), ['pytest_cov']);
  assert.deepEqual(environmentPlugins(site('4.3.1')), ['pytest_cov.plugin']);
  assert.deepEqual(environmentPlugins(undefined), []);
  assert.deepEqual(environmentPlugins(join(tmp, 'nowhere')), []);
});

test('hardenedRun: the restore and the test patch before any test, then the locked-down run with the report and the canaries', () => {
  const fixture = rows('mini.jsonl').find((r) => r.instance_id === 'polar-fixtures__textkit-1')!;
  const run = hardenedRun(
    { scratch: '/polar/scratch', workdir: '/testbed' },
    { ...fixture, base_commit: 'abc', FAIL_TO_PASS: [], PASS_TO_PASS: [] } as never,
    { testCmd: 'python3 -m pytest -rA', parser: 'pytest', directives: 'paths' },
    {
      agentPatch: attack('dist-info-plugin'),
      testPatchFile: '/polar/scratch/t.diff',
      setup: [],
      plugins: ['cov'],
    },
  );
  assert.equal(run.runner, 'pytest');
  assert.match(run.reportPath!, /^\/polar\/scratch\/polar-[0-9a-f]{16}\/[0-9a-f]{16}\.json$/);
  const order = ['textkit_compat-1.0.dist-info/entry_points.txt', 'apply --verbose', 'def test_'].map((w) =>
    run.prepare.indexOf(w),
  );
  assert.ok(
    order.every((i, k) => i > (order[k - 1] ?? -1)),
    run.prepare,
  );
  for (const word of [
    'PYTEST_DISABLE_PLUGIN_AUTOLOAD=1',
    'PYTHONNOUSERSITE=1',
    'unset PYTHONSTARTUP',
    'LD_PRELOAD',
    'PYTHONPYCACHEPREFIX=',
  ])
    assert.ok(run.test.includes(word), word);
  assert.match(
    run.test,
    /python3 -m pytest -rA '-p' 'p_[0-9a-f]{12}' '-p' 'cov' '--confcutdir=\/testbed' 'tests\/test_\w+\.py' 'tests\/test_slug\.py'/,
  );
  assert.equal(run.canaries.length, 2);
});

const pytestReport = (tests: object[], extra: object = {}) =>
  JSON.stringify({
    format: 'polar-pytest/1',
    exitstatus: 1,
    collected: tests.length,
    collect_errors: [],
    tests,
    ...extra,
  });

test("readPytestReport: a status per node id as -rA ends it; XFAIL and XPASS; not JSON or not polar's is no report", () => {
  const r = readPytestReport(
    pytestReport([
      { nodeid: 'a.py::p', when: 'setup', outcome: 'passed' },
      { nodeid: 'a.py::p', when: 'call', outcome: 'passed' },
      { nodeid: 'a.py::p', when: 'teardown', outcome: 'passed' },
      { nodeid: 'a.py::e', when: 'call', outcome: 'passed' },
      { nodeid: 'a.py::e', when: 'teardown', outcome: 'failed' },
      { nodeid: 'a.py::f', when: 'call', outcome: 'failed' },
      { nodeid: 'a.py::s', when: 'setup', outcome: 'skipped' },
      { nodeid: 'a.py::x', when: 'call', outcome: 'skipped', xfail: true },
      { nodeid: 'a.py::X', when: 'call', outcome: 'passed', xfail: true },
    ]),
  );
  assert.ok(typeof r !== 'string');
  assert.deepEqual(Object.fromEntries(r.tests), {
    'a.py::p': 'PASSED',
    'a.py::e': 'ERROR',
    'a.py::f': 'FAILED',
    'a.py::s': 'SKIPPED',
    'a.py::x': 'XFAIL',
    'a.py::X': 'XPASS',
  });
  assert.match(String(readPytestReport('{"format": "polar-pytest/1", "tests": [')), /not JSON/);
  assert.match(String(readPytestReport('{"tests": []}')), /not one polar wrote/);
  const node = readNodeReport(
    JSON.stringify({
      format: 'polar-node-test/1',
      counts: { tests: 4 },
      tests: [
        { id: 'a', outcome: 'pass' },
        { id: 's > b', outcome: 'fail' },
        { id: 'c', outcome: 'pass', skip: true },
        { id: 'd', outcome: 'fail', todo: true },
        { id: '/t/x.test.js', file: '/t/x.test.js', outcome: 'fail' },
      ],
    }),
  );
  assert.ok(typeof node !== 'string');
  assert.deepEqual(Object.fromEntries(node.tests), {
    a: 'PASSED',
    's > b': 'FAILED',
    c: 'SKIPPED',
    d: 'XFAIL',
    '/t/x.test.js': 'FAILED',
  });
  assert.deepEqual(node.loadErrors, ['/t/x.test.js']);
});

const CANARIES = [
  { id: 'tests/test_c.py::test_f', name: 'test_f', file: 'tests/test_c.py', expect: 'fail' as const },
  { id: 'tests/test_c.py::test_p', name: 'test_p', file: 'tests/test_c.py', expect: 'pass' as const },
];

function facts(tests: Array<[string, string, string?]>, over: Partial<RunFacts> = {}): RunFacts {
  const entries = tests.map(([nodeid, outcome, when]) => ({ nodeid, when: when ?? 'call', outcome }));
  // pytest's own record of its exit status: what the process would exit with unless something forced it
  const exitstatus = entries.some((e) => e.outcome === 'failed') ? 1 : 0;
  const text = pytestReport(entries, { exitstatus });
  return {
    runner: 'pytest',
    report: text,
    read: readPytestReport(text),
    exitCode: exitstatus,
    official: new Map(),
    canaries: CANARIES,
    expected: ['tests/test_s.py::test_new'],
    ...over,
  };
}

const honest: Array<[string, string]> = [
  ['tests/test_c.py::test_f', 'failed'],
  ['tests/test_c.py::test_p', 'passed'],
  ['tests/test_s.py::test_new', 'passed'],
];

test('judgeRun: an honest run proves nothing; each way of forging it is a proof with its evidence', () => {
  const parser = getLogParser('pytest')!;
  const judge = (f: RunFacts) => judgeRun(f, parser, '4.1');
  const ok = judge(facts(honest));
  assert.deepEqual(ok.findings, []);
  assert.equal(ok.evaluation.tests.get('tests/test_s.py::test_new'), 'PASSED');
  assert.equal(ok.evaluation.tests.has('tests/test_c.py::test_f'), true);
  const proofs = (f: RunFacts) =>
    judge(f)
      .findings.filter((x) => x.proof)
      .map((x) => `${x.layer}: ${x.tests ?? ''}`);
  // a hook that turns failures into passes: the must-fail canary passed, and nothing can exit 0
  assert.deepEqual(
    proofs(facts([['tests/test_c.py::test_f', 'passed'], ...honest.slice(1)], { exitCode: 0 })),
    ['exit-code: ', 'canary: tests/test_c.py::test_f: PASSED'],
  );
  assert.deepEqual(proofs(facts([['tests/test_c.py::test_f', 'skipped'], ...honest.slice(1)])), [
    'exit-code: ',
    'canary: tests/test_c.py::test_f: SKIPPED',
  ]);
  // missing: proof, unless its file failed to load (a broken conftest above it is no forgery)
  assert.deepEqual(proofs(facts(honest.slice(2))), [
    'exit-code: ',
    'canary: tests/test_c.py::test_f,tests/test_c.py::test_p',
  ]);
  const broken = pytestReport(
    honest.slice(2).map(([nodeid, outcome]) => ({ nodeid, when: 'call', outcome })),
    // pytest stops at a collection error: exit status 2, interrupted
    { collect_errors: ['tests'], exitstatus: 2 },
  );
  assert.deepEqual(proofs(facts([], { report: broken, read: readPytestReport(broken), exitCode: 2 })), []);
  // pytest's ids relative to another rootdir: found by name and file name
  assert.deepEqual(proofs(facts(honest.map(([id, o]) => [id.replace(/^tests\//, ''), o]))), []);
  // exit hooks: the process's status is not the one pytest recorded
  assert.deepEqual(proofs(facts(honest, { exitCode: 0 })), ['exit-code: ', 'exit-code: ']);
  // forged output: the output says PASSED, the report says failed
  const forged = facts([...honest.slice(0, 2), ['tests/test_s.py::test_new', 'failed']], {
    official: new Map([['tests/test_s.py::test_new', 'PASSED']]),
  });
  assert.deepEqual(proofs(forged), ['report: tests/test_s.py::test_new']);
  assert.equal(judge(forged).evaluation.tests.get('tests/test_s.py::test_new'), 'FAILED');
  // no report: nothing passes, and a runner that exits 0 without one is a proof
  const none = judge(facts([], { report: null, read: null, exitCode: 0 }));
  assert.equal(none.evaluation.found, false);
  assert.match(String(none.evaluation.reason), /wrote no report/);
  assert.deepEqual(
    none.findings.map((f) => f.layer),
    ['exit-code'],
  );
});

test("judgeRun, sympy's output: a canary on a file's last line (its `[OK]`/`[FAIL]` tag) is read; a forged `ok` is a proof", () => {
  const parser = getLogParser('sympy')!;
  const canaries = [
    { id: 'test_f', name: 'test_f', file: 'sympy/core/tests/test_c.py', expect: 'fail' as const },
    { id: 'test_p', name: 'test_p', file: 'sympy/core/tests/test_c.py', expect: 'pass' as const },
  ];
  const output = (fail: string) =>
    [
      '>>>>> Start Test Output',
      'sympy/core/tests/test_c.py[2] ',
      `test_f ${fail}`,
      'test_p ok                                       [FAIL]',
      'sympy/core/tests/test_basic.py[2] ',
      'test_immutable ok',
      'test_other ok                                   [OK]',
      '>>>>> End Test Output',
    ].join('\n');
  const facts = (text: string, exitCode: number): RunFacts => ({
    runner: 'stdout',
    report: null,
    read: null,
    exitCode,
    official: parser(text, '4.1'),
    officialFound: { found: true, reason: null },
    output: text,
    canaries,
    expected: ['test_immutable'],
  });
  assert.deepEqual(judgeRun(facts(output('F'), 1), parser, '4.1').findings, []);
  const forged = judgeRun(facts(output('ok'), 0), parser, '4.1').findings;
  assert.deepEqual(
    forged.map((f) => `${f.layer}: ${f.tests ?? ''}`),
    ['exit-code: ', 'canary: test_f: PASSED'],
  );
});

test("judgeRun: ids through the row's parser (4.1 cuts at the first space); a skip keeps its id only where the output has it; XPASS is left out", () => {
  const parser = getLogParser('pytest')!;
  const f = facts([
    ...honest,
    ['tests/test_s.py::test_p[a b]', 'passed'],
    ['tests/test_s.py::test_skip', 'skipped', 'setup'],
  ]);
  const tests = judgeRun(f, parser, '4.1').evaluation.tests;
  assert.equal(tests.get('tests/test_s.py::test_p[a'), 'PASSED');
  assert.equal(tests.has('tests/test_s.py::test_skip'), false);
  const xf = facts([...honest, ['tests/test_s.py::test_x', 'skipped']]);
  const read = xf.read as Exclude<RunFacts['read'], string | null>;
  read.tests.set('tests/test_s.py::test_x', 'XFAIL');
  read.tests.set('tests/test_s.py::test_y', 'XPASS');
  const judged = judgeRun(xf, parser, '4.1').evaluation.tests;
  assert.equal(judged.get('tests/test_s.py::test_x'), 'XFAIL');
  assert.equal(judged.has('tests/test_s.py::test_y'), false);
  const flags = expectedFailures(['tests/test_s.py::test_x', 'tests/test_s.py::test_y'], judged, read);
  assert.deepEqual(flags[0]!.tests, ['tests/test_s.py::test_x', 'tests/test_s.py::test_y']);
});

test('node canaries appended to a test file: under node --test the must-fail ones fail and the must-pass one passes, in ESM and CommonJS', () => {
  for (const [name, head] of [
    ['esm.test.mjs', "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\n"],
    [
      'cjs.test.cjs',
      "const { test } = require('node:test');\nconst assert = require('node:assert/strict');\n",
    ],
  ] as const) {
    const file = join(tmp, name);
    const plan = nodeCanaries(name);
    writeFileSync(file, `${head}test('real', () => assert.equal(1, 1));\n${plan.content}`);
    const env = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    const r = spawnSync(process.execPath, ['--test', '--test-reporter=tap', file], { encoding: 'utf8', env });
    const status = (id: string) => new RegExp(`^(not ok|ok) \\d+ - ${id}$`, 'm').exec(r.stdout)?.[1];
    assert.equal(status('real'), 'ok', r.stdout);
    for (const c of plan.canaries)
      assert.equal(status(c.id), c.expect === 'fail' ? 'not ok' : 'ok', `${name} ${c.id}`);
    assert.equal(r.status, 1);
  }
});

test('canaries are named afresh each run, beside the test file, as test functions the runners collect', () => {
  const a = pythonCanaries('tests/test_slug.py', 'pytest');
  const b = pythonCanaries('tests/test_slug.py', 'pytest', cryptoRandom);
  assert.notEqual(a.file, b.file);
  assert.match(a.file, /^tests\/test_\w+\.py$/);
  assert.deepEqual(
    a.canaries.map((c) => c.expect),
    ['fail', 'pass'],
  );
  for (const c of a.canaries)
    assert.ok(c.id.startsWith(`${a.file}::test_`) && a.content.includes(`def ${c.name}():`));
  assert.deepEqual(
    pythonCanaries('sympy/core/tests/test_x.py', 'sympy').canaries.map((c) => c.id.startsWith('test_')),
    [true, true],
  );
  assert.equal(readdirSync(tmp).length >= 0, true);
});

test('tamperingRecord: none without findings; a proof grades 0 in every mode, a flag only when rejecting', () => {
  assert.equal(tamperingRecord([], true), null);
  const flag: Finding = { layer: 'runner-access', file: 'a.py', line: 3, reason: 'imports pytest' };
  const proof: Finding = { layer: 'canary', reason: 'canary passed', proof: true };
  assert.deepEqual(tamperingRecord([flag], false), {
    files: ['a.py'],
    reason: 'imports pytest',
    rejected: false,
    proven: false,
    findings: [flag],
  });
  assert.equal(tamperingRecord([flag], true)?.rejected, true);
  assert.deepEqual(tamperingRecord([flag, proof], false), {
    files: ['a.py'],
    reason: 'imports pytest; canary passed',
    rejected: true,
    proven: true,
    findings: [flag, proof],
  });
});
