/**
 * The install memo (src/rollout/env/install-memo.ts): the install of the unpatched tree traced once and
 * replayed in later samples whose patch touches nothing it read. The trace reader and the patch reader on
 * records of the shape the hook writes (the sympy record below is a real one's shape: sympy 1.7's
 * `pip install -e .`, pip 23, `setup.py develop`), then for real in the sandbox on the minitest fixture
 * (a PEP 517/660 in-tree backend, pytest-dev__pytest-7432's shape): the replayed layer and tree files are
 * those of the install; a patch that changes what the install reads runs it; no sample can change a memo.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { loadDataset, type SweInstance } from '../../../src/rollout/dataset.ts';
import { Environments } from '../../../src/rollout/env/build.ts';
import {
  judgeTrace,
  MEMO_DIR,
  memoKey,
  memoMisses,
  patchPaths,
  readMemo,
  saveMemo,
  TRACE_MODULE,
  TRACE_SOURCE,
  traceableInstall,
} from '../../../src/rollout/env/install-memo.ts';
import type { CachedEnv } from '../../../src/rollout/env/types.ts';
import { gradePatch } from '../../../src/rollout/grade.ts';
import { probeSandbox } from '../../../src/rollout/runtime/probe.ts';
import { SandboxRuntime } from '../../../src/rollout/runtime/sandbox.ts';
import type { InstanceEnv } from '../../../src/rollout/runtime/types.ts';
import { tempDir } from '../../support/temp.ts';
import { ENVS, envFixtures, offlinePip, REPOS } from '../rollout/run/helpers.ts';

const place = { tree: '/testbed', layer: '/polar/scratch/polar-env' };
const py = '/polar/scratch/polar-env/bin/python';
const rec = (...r: unknown[]) => JSON.stringify([7, ...r]);

test('traceableInstall: one pip or setup.py command, nothing a shell runs beside it', () => {
  for (const ok of [
    'python -m pip install -e .',
    'pip install -e .[test]',
    'python -m pip install -v --no-use-pep517 --no-build-isolation -e .',
    'python setup.py develop',
    'python3.9 -m pip install -e .',
  ])
    assert.equal(traceableInstall(ok), true, ok);
  for (const no of [
    null,
    '',
    'pip install -e . && make',
    'python -m pip install -e .; touch x',
    'make install',
    'python -m pip install -e . | tee log',
    'python -m pip install $(cat reqs)',
    './build.sh',
  ])
    assert.equal(traceableInstall(no), false, String(no));
});

test("judgeTrace: the tree's files read or written and folders listed; pip's probes pass; another program, a Python without the hook or an old Python do not", () => {
  // sympy 1.7 under pip 23 (`setup.py develop`): pip's probes, two setup.py processes, egg-info written
  const sympy = [
    rec('start', py, ['-m', 'pip']),
    rec('exec', 'lsb_release', ['lsb_release', '-a']),
    rec('exec', 'uname', ['uname', '-rs']),
    rec('exec', 'rustc', ['rustc', '--version']),
    rec('read', '/etc/pip.conf'),
    rec('exec', py, [py, '-c', 'exec(compile(...))', 'egg_info']),
    rec('start', py, ['-c', 'egg_info']),
    rec('read', '/testbed/setup.py'),
    rec('read', '/testbed/setup.cfg'),
    rec('read', '/testbed/sympy/release.py'),
    rec('list', '/testbed'),
    rec('list', '/testbed/sympy/core'),
    rec('write', '/tmp/pip-egg-info-x/sympy.egg-info/PKG-INFO'),
    rec('exec', py, [py, '-c', 'exec(compile(...))', 'develop']),
    rec('start', py, ['-c', 'develop']),
    rec('touch', '/testbed/sympy.egg-info'),
    rec('write', '/testbed/sympy.egg-info/PKG-INFO'),
    rec('read', '/testbed/sympy.egg-info/PKG-INFO'),
    rec('delete', '/testbed/top_level.txt'),
    rec('write', '/polar/scratch/polar-env/lib/python3.9/site-packages/easy-install.pth'),
  ].join('\n');
  const v = judgeTrace(sympy, place);
  assert.ok(v.ok, JSON.stringify(v));
  assert.deepEqual(v.files, [
    'setup.cfg',
    'setup.py',
    'sympy.egg-info',
    'sympy.egg-info/PKG-INFO',
    'sympy/release.py',
  ]);
  assert.deepEqual(v.listed, ['', 'sympy/core']);
  assert.deepEqual(v.wrote, ['sympy.egg-info', 'sympy.egg-info/PKG-INFO']);
  assert.deepEqual(v.deleted, ['top_level.txt']);

  const gcc = judgeTrace(
    [rec('start', py, []), rec('exec', 'gcc', ['gcc', '-c', 'ext.c', '-o', 'ext.o'])].join('\n'),
    place,
  );
  assert.deepEqual(gcc, { ok: false, why: 'it runs gcc -c ext.c, which the trace cannot see into' });
  const git = judgeTrace([rec('start', py, []), rec('exec', 'git', ['git', 'describe'])].join('\n'), place);
  assert.equal(git.ok, false);
  // a Python child that did not load the hook (python -S): its reads are unseen
  const unhooked = judgeTrace(
    [rec('start', py, []), rec('exec', py, [py, '-S', 'setup.py'])].join('\n'),
    place,
  );
  assert.deepEqual(unhooked, {
    ok: false,
    why: 'a Python process it started did not load the trace (python -S?)',
  });
  // Python 3.7 and older: the hook writes nothing
  assert.deepEqual(judgeTrace('', place), {
    ok: false,
    why: 'its Python has no audit hooks (PEP 578 needs Python 3.8+)',
  });
  assert.equal(judgeTrace(`${rec('start', py, [])}\nnot json`, place).ok, false);
  assert.equal(judgeTrace([rec('start', py, []), rec('error', 'open')].join('\n'), place).ok, false);
});

test('the hook, run by Python: what a build does is recorded as judgeTrace reads it; a link is a copy; a walk by descriptor is not read as the cwd', () => {
  const dir = tempDir('polar-trace-hook-');
  const tree = join(dir, 'tree');
  mkdirSync(join(tree, 'pkg'), { recursive: true });
  writeFileSync(join(tree, 'setup.py'), 'x');
  writeFileSync(join(tree, 'LICENSE'), 'x');
  writeFileSync(join(dir, `${TRACE_MODULE}.py`), TRACE_SOURCE);
  const run = (code: string) => {
    const log = join(dir, `trace-${Math.random()}.log`);
    const r = spawnSync(
      'python3',
      ['-c', `import sys; sys.path.insert(0, ${JSON.stringify(dir)}); import ${TRACE_MODULE}\n${code}`],
      {
        cwd: tree,
        encoding: 'utf8',
        env: { ...process.env, POLAR_INSTALL_TRACE: log },
      },
    );
    assert.equal(r.status, 0, r.stderr);
    return judgeTrace(readFileSync(log, 'utf8'), { tree, layer: join(dir, 'layer') });
  };
  const built = run(
    [
      'import os, shutil, tempfile',
      "open('setup.py').read()",
      "os.listdir('pkg')",
      "os.makedirs('pkg.egg-info', exist_ok=True)",
      "open('pkg.egg-info/PKG-INFO', 'w').write('x')",
      "os.link('LICENSE', os.path.join(tempfile.mkdtemp(), 'LICENSE'))",
      "t = tempfile.mkdtemp(); open(os.path.join(t, 'a'), 'w').write('x'); shutil.rmtree(t)",
    ].join('\n'),
  );
  assert.ok(built.ok, JSON.stringify(built));
  assert.deepEqual(built.files, ['LICENSE', 'pkg.egg-info', 'pkg.egg-info/PKG-INFO', 'setup.py']);
  assert.deepEqual(built.listed, ['pkg']);
  assert.deepEqual(built.wrote, ['pkg.egg-info', 'pkg.egg-info/PKG-INFO']);
  assert.deepEqual(built.deleted, []);
  const compiled = run("import subprocess; subprocess.run(['true'])");
  assert.deepEqual(compiled, { ok: false, why: 'it runs true, which the trace cannot see into' });
});

test('patchPaths and memoMisses: a change to a file the install read, or a new file in a folder it listed, misses; other changes replay', () => {
  const modify = (p: string) =>
    `diff --git a/${p} b/${p}\nindex 1..2 100644\n--- a/${p}\n+++ b/${p}\n@@ -1 +1 @@\n-a\n+b\n`;
  const add = (p: string) =>
    `diff --git a/${p} b/${p}\nnew file mode 100644\nindex 0..2\n--- /dev/null\n+++ b/${p}\n@@ -0,0 +1 @@\n+b\n`;
  const rename = (a: string, b: string) =>
    `diff --git a/${a} b/${b}\nsimilarity index 100%\nrename from ${a}\nrename to ${b}\n`;
  assert.deepEqual(patchPaths(modify('src/a.py')), {
    touched: new Set(['src/a.py']),
    structural: new Set(),
  });
  assert.deepEqual(patchPaths(add('src/new.py'))?.structural, new Set(['src/new.py']));
  assert.deepEqual(patchPaths(rename('a/x.py', 'b/y.py'))?.structural, new Set(['a/x.py', 'b/y.py']));
  assert.equal(patchPaths('diff --git "a/sp ace" "b/sp ace"\n'), null);
  assert.equal(patchPaths(modify('../etc/passwd')), null);
  assert.equal(patchPaths('*** a/x.py\n--- b/x.py\n'), null);
  // a plain `diff -u` without git's header
  assert.deepEqual(
    patchPaths('--- a/setup.py\t2020\n+++ b/setup.py\t2020\n@@ -1 +1 @@\n-a\n+b\n')?.touched,
    new Set(['setup.py']),
  );

  const memo = {
    files: ['setup.py', 'sympy/release.py', 'sympy.egg-info/PKG-INFO'],
    listed: ['', 'sympy/core'],
  };
  assert.equal(memoMisses(memo, ''), null);
  assert.equal(memoMisses(memo, modify('sympy/core/basic.py')), null);
  assert.equal(memoMisses(memo, add('sympy/polys/new.py')), null);
  assert.equal(memoMisses(memo, modify('setup.py')), 'the patch changes setup.py, which the install reads');
  assert.equal(
    memoMisses(memo, modify('sympy/release.py') + modify('sympy/core/basic.py')),
    'the patch changes sympy/release.py, which the install reads',
  );
  assert.equal(
    memoMisses(memo, add('sympy/core/new.py')),
    'the patch adds, removes or renames sympy/core/new.py, in a folder the install lists',
  );
  assert.equal(
    memoMisses(memo, add('reproduce.py')),
    'the patch adds, removes or renames reproduce.py, in a folder the install lists',
  );
  // a file the install writes, planted by the patch
  assert.match(String(memoMisses(memo, add('sympy.egg-info/PKG-INFO'))), /sympy\.egg-info\/PKG-INFO/);
  assert.equal(
    memoMisses(memo, 'diff --git "a/x y" "b/x y"\n'),
    'the patch names a path polar cannot read plainly',
  );
});

test('saveMemo and readMemo: a memo and an unmemoizable verdict round-trip; the first memo written is kept; a memo that does not parse is none', async () => {
  const dir = tempDir('polar-memo-store-');
  const cached = {
    key: 'k',
    name: 'e',
    dir: join(dir, 'env'),
    sitePackages: join(dir, 'env/lib/python3.11/site-packages'),
  } as CachedEnv;
  const layer = join(dir, 'layer');
  const tree = join(dir, 'tree');
  mkdirSync(join(layer, 'lib/python3.11/site-packages'), { recursive: true });
  writeFileSync(join(layer, 'lib/python3.11/site-packages/easy-install.pth'), '/testbed\n');
  writeFileSync(join(layer, `lib/python3.11/site-packages/${TRACE_MODULE}.py`), 'hook');
  mkdirSync(join(tree, 'pkg.egg-info'), { recursive: true });
  writeFileSync(join(tree, 'pkg.egg-info/PKG-INFO'), 'Name: pkg\n');
  const verdict = {
    ok: true as const,
    files: ['setup.py', 'pkg.egg-info/PKG-INFO'],
    listed: [''],
    wrote: ['pkg.egg-info/PKG-INFO'],
    deleted: [],
  };
  const saved = await saveMemo(cached, 'a1', verdict, { layer, tree }, 'pip said\n');
  assert.ok('files' in saved);
  const read = await readMemo(cached, 'a1');
  assert.deepEqual(read, saved);
  const memo = join(cached.dir, MEMO_DIR, 'a1');
  assert.equal(
    readFileSync(join(memo, 'layer/lib/python3.11/site-packages/easy-install.pth'), 'utf8'),
    '/testbed\n',
  );
  assert.equal(existsSync(join(memo, `layer/lib/python3.11/site-packages/${TRACE_MODULE}.py`)), false);
  assert.equal(readFileSync(join(memo, 'tree/pkg.egg-info/PKG-INFO'), 'utf8'), 'Name: pkg\n');
  assert.equal(readFileSync(join(memo, 'install.log'), 'utf8'), 'pip said\n');
  // a second writer of the same key keeps the first's
  const again = await saveMemo(cached, 'a1', { ok: false, why: 'late' }, { layer, tree }, '');
  assert.deepEqual(again, saved);
  assert.deepEqual(readdirSync(join(cached.dir, MEMO_DIR)), ['a1']);
  // an unmemoizable verdict is kept, so the trace runs once
  assert.deepEqual(await saveMemo(cached, 'b2', { ok: false, why: 'it runs gcc' }, { layer, tree }, ''), {
    unmemoizable: 'it runs gcc',
  });
  assert.deepEqual(await readMemo(cached, 'b2'), { unmemoizable: 'it runs gcc' });
  // torn or foreign: none (the install runs, and a new trace writes beside it)
  writeFileSync(join(cached.dir, MEMO_DIR, 'b2', 'memo.json'), '{"version":1,');
  assert.equal(await readMemo(cached, 'b2'), null);
  assert.equal(await readMemo(cached, 'zz'), null);
});

test('memoKey: another base commit, tree path, install step, or the same environment seen at another path is another memo', () => {
  const cached = {
    key: 'k',
    dir: '/cache/env',
    python: { executable: '/usr/bin/python3.11' },
    recipe: { preInstall: [], install: 'python -m pip install -e .' },
  } as unknown as CachedEnv;
  const place = { repo: 'o/r', baseCommit: 'abc', tree: '/testbed', layer: '/polar/scratch/polar-env' };
  const key = memoKey(cached, place);
  assert.match(key, /^[0-9a-f]{24}$/);
  assert.equal(memoKey({ ...cached }, { ...place }), key);
  for (const other of [
    memoKey(cached, { ...place, baseCommit: 'abd' }),
    memoKey(cached, { ...place, tree: '/work' }),
    memoKey({ ...cached, dir: '/mnt/cache/env' }, place),
    memoKey({ ...cached, python: { executable: '/opt/python3.11' } } as unknown as CachedEnv, place),
    memoKey(
      { ...cached, recipe: { preInstall: [], install: 'pip install -e .' } } as unknown as CachedEnv,
      place,
    ),
  ])
    assert.notEqual(other, key);
});

// the real thing, in the sandbox, on the minitest fixture
const sandbox = await probeSandbox();
const skip = sandbox.ok ? false : `bubblewrap does not work here: ${sandbox.error}`;
const tmp = tempDir('polar-install-memo-');
let instance: SweInstance;
let runtime: SandboxRuntime;
let envDir: string;

before(async () => {
  if (skip) return;
  envFixtures();
  [instance] = (await loadDataset(ENVS)) as [SweInstance];
  const environments = new Environments({ cacheDir: join(tmp, 'cache'), reposDir: REPOS, env: offlinePip() });
  envDir = (await environments.forInstance(instance))!.dir;
  runtime = new SandboxRuntime({ reposDir: REPOS, environments });
});

/** the layer and the tree's untracked files as the sample sees them: names, link targets, contents */
async function snapshot(env: InstanceEnv): Promise<string> {
  const r = await env.exec(
    [
      'set -e',
      'cd /polar/scratch/polar-env && find . -printf "%y %p %l\\n" | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum',
      'cd /testbed && git status --porcelain --ignored --untracked-files=all',
    ].join('\n'),
  );
  assert.equal(r.exitCode, 0, r.output);
  return r.output;
}

const memos = () => readdirSync(join(envDir, MEMO_DIR));
const memoOf = () => JSON.parse(readFileSync(join(envDir, MEMO_DIR, memos()[0]!, 'memo.json'), 'utf8'));

test(
  'sandbox: the install of the unpatched tree is traced once and kept; a later sample gets the same layer and tree files replayed; no sample can change the memo',
  { skip },
  async () => {
    const first = await runtime.prepare(instance, 'grade');
    let traced: string;
    try {
      const out = await first.environment!.install();
      assert.equal(out.ok, true, out.output);
      assert.match(out.output, /polar environment: trace\n/);
      traced = await snapshot(first);
      assert.doesNotMatch(traced, /_polar_install_trace|polar-install-trace/);
    } finally {
      await first.dispose();
    }
    assert.equal(memos().length, 1);
    const memo = memoOf();
    // what minitest's in-tree backend reads: its own code and the project's metadata
    assert.ok(memo.files.includes('pyproject.toml'), JSON.stringify(memo));
    assert.ok(memo.files.includes('_build/minitest_backend.py'), JSON.stringify(memo));

    const second = await runtime.prepare(instance, 'grade');
    try {
      const out = await second.environment!.install();
      assert.equal(out.ok, true, out.output);
      assert.match(out.output, /install: python -m pip install -e \. \(replayed: /);
      assert.doesNotMatch(out.output, /Successfully installed/);
      assert.equal(await snapshot(second), traced);
      const imported = await second.exec('python -c "import minitest; print(minitest.__file__)"');
      assert.equal(imported.output.trim(), '/testbed/src/minitest/__init__.py');
      // a sample (the tests of an agent's patch run here) writing into the memo: refused
      const dir = join(envDir, MEMO_DIR, memos()[0]!);
      const before = readFileSync(join(dir, 'memo.json'), 'utf8');
      const write = await second.exec(
        `echo '{}' > ${dir}/memo.json; touch ${dir}/layer/lib/evil.pth; rm -rf ${dir}/tree; echo done`,
      );
      assert.match(write.output, /Read-only file system/);
      assert.equal(readFileSync(join(dir, 'memo.json'), 'utf8'), before);
      assert.equal(existsSync(join(dir, 'layer/lib/evil.pth')), false);
    } finally {
      await second.dispose();
    }
    assert.equal(memos().length, 1);
  },
);

test(
  'sandbox: graded patches: the gold patch replays the install; one that changes pyproject.toml runs it and still resolves',
  { skip },
  async () => {
    const options = { testTimeoutMs: 120_000, hardened: true };
    const gold = await gradePatch(runtime, instance, instance.patch, options);
    assert.equal(gold.status, 'resolved', String(gold.reason));
    assert.match(String(gold.log), /\(replayed: the patch changes none of the \d+ files/);
    const touched = `${instance.patch}diff --git a/pyproject.toml b/pyproject.toml
--- a/pyproject.toml
+++ b/pyproject.toml
@@ -1,2 +1,3 @@
+# a comment the backend reads
 # A src/-layout package built by its own in-tree backend (_build/), which needs nothing from an index:
 # \`pip install -e .\` and \`pip wheel .\` work offline, on any Python with pip >= 21.3 (PEP 517 + PEP 660).
`;
    const reinstalled = await gradePatch(runtime, instance, touched, options);
    assert.equal(reinstalled.status, 'resolved', `${reinstalled.reason}\n${reinstalled.log}`);
    assert.match(
      String(reinstalled.log),
      /install not replayed: the patch changes pyproject\.toml, which the install reads/,
    );
    assert.match(String(reinstalled.log), /Successfully installed/);
  },
);
