/**
 * Environments built from a row's spec, on the fixture shaped like pytest-dev__pytest-7432
 * (fixtures/swe/env-tasks/polar-fixtures__minitest-9): a src/-layout test runner whose base version is
 * installed in the environment (pip_packages polar-minitest==1.0), tested by its own `minitest`
 * command. Gold resolves only because the per-sample install puts the patched tree first; empty does
 * not; without the install step the guard makes the sample an error. pip runs offline on the fixture
 * wheels (helpers.ts offlinePip).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import type { Agent } from '../../../src/rollout/agents.ts';
import { loadDataset } from '../../../src/rollout/dataset.ts';
import { Environments } from '../../../src/rollout/env/build.ts';
import { runEval } from '../../../src/rollout/run/run.ts';
import { LocalRuntime } from '../../../src/rollout/runtime/local.ts';
import { probeSandbox } from '../../../src/rollout/runtime/probe.ts';
import { SandboxRuntime } from '../../../src/rollout/runtime/sandbox.ts';
import { tempDir } from '../../support/temp.ts';
import {
  ENVS,
  envFixtures,
  localEvalOptions,
  offlinePip,
  polar,
  REPOS,
  ROOT,
} from '../rollout/run/helpers.ts';

const tmp = tempDir('polar-envs-');
const cache = join(tmp, 'cache');
const ID = 'polar-fixtures__minitest-9';
const baseRow = () => JSON.parse(readFileSync(ENVS, 'utf8').split('\n')[0]!) as Record<string, unknown>;

/** a dataset of the minitest row with some fields changed (undefined removes one) */
function dataset(name: string, change: Record<string, unknown> = {}): string {
  const row = { ...baseRow(), ...change };
  for (const [k, v] of Object.entries(change)) if (v === undefined) delete row[k];
  const path = join(tmp, `${name}.jsonl`);
  writeFileSync(path, `${JSON.stringify(row)}\n`);
  return path;
}

function evalRun(data: string, agent: string, out: string, extra: string[] = [], env = offlinePip()) {
  const r = polar(
    [
      'eval',
      '--dataset',
      data,
      '--agent',
      agent,
      '--runtime',
      'local',
      '--repos',
      REPOS,
      '--env-cache',
      cache,
      '--out',
      join(tmp, out),
      ...extra,
    ],
    env,
  );
  const lines = existsSync(join(tmp, out, 'results.jsonl'))
    ? readFileSync(join(tmp, out, 'results.jsonl'), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
    : [];
  return { ...r, line: lines.at(-1) as Record<string, unknown> | undefined };
}

before(() => envFixtures());

test('gold resolves through the per-sample install over a cached environment, empty does not, and the second run builds nothing', () => {
  const gold = evalRun(ENVS, 'gold', 'gold');
  assert.equal(gold.code, 0, gold.stderr);
  assert.equal(gold.line?.status, 'resolved', String(gold.line?.reason));
  assert.match(gold.stderr, /environment polar-fixtures\/minitest 1\.0: building/);
  const name = gold.line?.environment as string;
  assert.match(name, /^polar-fixtures__minitest-1\.0-[0-9a-f]{12}$/);
  const log = readFileSync(join(tmp, 'gold', 'logs', `${ID}__s0.test.log`), 'utf8');
  // pip left the environment's installed copy alone and installed the tree into the layer
  assert.match(log, /Not uninstalling polar-minitest at .*outside environment/);
  const built = readdirSync(cache).sort();

  const empty = evalRun(ENVS, 'empty', 'empty', ['--grade-empty-patches']);
  assert.equal(empty.code, 0, empty.stderr);
  assert.equal(empty.line?.status, 'unresolved');
  assert.match(
    String(empty.line?.reason),
    /FAIL_TO_PASS failed \(testing\/test_skipping\.py::test_location_runxfail\)/,
  );
  assert.doesNotMatch(empty.stderr, /building/);
  assert.equal(empty.line?.environment, name);
  assert.deepEqual(readdirSync(cache).sort(), built);
});

test('polar env build: the environment of the run above is found in the cache; a Python version the machine lacks is an error naming it', () => {
  const r = polar(
    ['env', 'build', '--dataset', ENVS, '--repos', REPOS, '--env-cache', cache, '--json'],
    offlinePip(),
  );
  assert.equal(r.code, 0, r.stderr);
  const [line] = JSON.parse(r.stdout) as Array<Record<string, unknown>>;
  assert.equal(line?.status, 'cached');
  assert.deepEqual(line?.instances, [ID]);
  assert.match(String(line?.dir), /polar-fixtures__minitest-1\.0-[0-9a-f]{12}$/);

  const old = polar(
    ['env', 'build', '--dataset', dataset('py21', { python: '2.1' }), '--repos', REPOS, '--env-cache', cache],
    offlinePip(),
  );
  assert.equal(old.code, 4);
  assert.match(old.stdout, /1 environment: 0 built, 0 cached, 1 failed/);
  assert.match(
    old.stderr,
    /Python 2\.1 \(the spec of polar-fixtures\/minitest 1\.0\) is not on this machine/,
  );
  assert.match(old.stderr, /--env-python 2\.1=/);
});

test('without the install step the installed base version is tested: the guard makes it an error naming both paths', () => {
  const r = evalRun(dataset('noinstall', { install: undefined }), 'gold', 'noinstall');
  assert.equal(r.code, 1);
  assert.equal(r.line?.status, 'error');
  assert.equal(r.line?.reward, null);
  const reason = String(r.line?.reason);
  // (issue 46: the environment is validated first; its gold patch meets the guard, so its samples are
  // excluded, the reason naming the environment and the guard's words)
  assert.equal(r.line?.excluded, 'invalid_environment');
  assert.match(
    reason,
    /^environment polar-fixtures__minitest-1\.0-[0-9a-f]{12} failed validation: the gold patch of polar-fixtures__minitest-9 was error \(import guard: the tests imported minitest from .*\/site-packages\/minitest\/__init__\.py, not from the sample's tree \/.*\/repo/,
  );
});

test('a pip install that fails is an error naming the requirement, with its log; --resume builds it once it can be had, as a new environment beside the old', () => {
  const envs = () => readdirSync(cache).filter((n) => !n.endsWith('.lock') && !n.endsWith('.failed.log'));
  const before = envs();
  const data = dataset('missing', { pip_packages: ['polar-minitest==1.1'] });
  const r = evalRun(data, 'gold', 'missing');
  assert.equal(r.code, 1);
  assert.equal(r.line?.status, 'error');
  assert.match(
    String(r.line?.reason),
    /pip install 1 pip package failed: pip cannot install polar-minitest==1\.1 \(versions it can find: 1\.0\)/,
  );
  const envLog = readFileSync(join(tmp, 'missing', 'logs', `${ID}__s0.env.log`), 'utf8');
  assert.match(envLog, /No matching distribution found for polar-minitest==1\.1/);
  // the failed build leaves no environment, and its log beside the cache
  assert.ok(readdirSync(cache).some((n) => n.endsWith('.failed.log')));

  // the 1.1 release appears where pip looks (a user with the index the spec needs)
  const links = join(tmp, 'links');
  const src = join(tmp, 'minitest-1.1');
  cpSync(join(ROOT, 'fixtures/swe/src/polar-fixtures/minitest'), src, { recursive: true });
  writeFileSync(join(src, 'src/minitest/__init__.py'), '__version__ = "1.1"\n');
  mkdirSync(links);
  const build = polarPython(src, links);
  assert.equal(build.status, 0, build.stderr);
  const again = evalRun(data, 'gold', 'missing', ['--resume'], offlinePip(links));
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.line?.status, 'resolved');
  // the changed spec (1.1 instead of 1.0) built its own environment; the first one is still there
  assert.match(again.stderr, /building/);
  assert.deepEqual(envs().sort(), [...before, again.line?.environment as string].sort());
});

/** builds the wheel of a minitest tree with its in-tree backend */
function polarPython(src: string, out: string) {
  return spawnSync(
    'python3',
    [
      '-c',
      'import sys; sys.path.insert(0, "_build"); import minitest_backend as b; b.build_wheel(sys.argv[1])',
      out,
    ],
    { cwd: src, encoding: 'utf8' },
  );
}

/** an agent that runs `script` (its output into `seen`), then writes the fixture's fix */
function fixingAgent(script: string, seen: string[]): Agent {
  return {
    name: 'scripted',
    runsUntrustedCode: true,
    modelName: 'scripted',
    async run({ env }) {
      seen.push((await env.exec(script)).output);
      await env.writeFile(
        'src/minitest/skipping.py',
        readFileSync(join(ROOT, 'fixtures/swe/env-tasks', ID, 'fix/src/minitest/skipping.py'), 'utf8'),
      );
      return { status: 'completed', capture: null, sessionId: null, calls: 1, error: null };
    },
  };
}

test('an agent that runs code gets the environment installed; its patch holds only its own change', async () => {
  const [instance] = await loadDataset(ENVS);
  assert.ok(instance);
  const seen: string[] = [];
  // the tests run in the layer, against the tree: the base version fails the new case
  const agent = fixingAgent(
    'command -v minitest; command -v python; python -c "import minitest; print(minitest.__file__)"; git log --format=%s -1',
    seen,
  );
  const environments = new Environments({ cacheDir: cache, reposDir: REPOS, env: offlinePip() });
  const runtime = new LocalRuntime({ reposDir: REPOS, environments, env: offlinePip() });
  const { results } = await runEval(localEvalOptions([instance], agent, join(tmp, 'agent'), { runtime }));
  assert.equal(results[0]?.status, 'resolved', String(results[0]?.reason));
  const [minitest, python, file] = (seen[0] ?? '').trim().split('\n');
  assert.match(String(minitest), /\/polar-env\/bin\/minitest$/);
  assert.match(String(python), /\/polar-env\/bin\/python$/);
  assert.match(String(file), /\/repo\/src\/minitest\/__init__\.py$/);
  const patch = readFileSync(String(results[0]?.patch_file), 'utf8');
  assert.deepEqual(
    [...patch.matchAll(/^diff --git a\/(\S+)/gm)].map((m) => m[1]),
    ['src/minitest/skipping.py'],
  );
});

const sandbox = await probeSandbox();

test(
  'sandbox runtime: the cached environment bound read-only, the layer in the sandbox; the fix resolves and the agent cannot change the cache',
  { skip: sandbox.ok ? false : `bubblewrap does not work here: ${sandbox.error}` },
  async () => {
    const [instance] = await loadDataset(ENVS);
    assert.ok(instance);
    const environments = new Environments({ cacheDir: cache, reposDir: REPOS, env: offlinePip() });
    const cached = await environments.forInstance(instance);
    assert.ok(cached);
    const seen: string[] = [];
    const agent = fixingAgent(
      [
        'command -v minitest; command -v python',
        'python -c "import minitest; print(minitest.__file__)"',
        `touch ${cached.dir}/polar-agent-was-here 2>/dev/null && echo cache-writable || echo cache-read-only`,
      ].join('; '),
      seen,
    );
    const runtime = new SandboxRuntime({ reposDir: REPOS, environments });
    const { results } = await runEval(localEvalOptions([instance], agent, join(tmp, 'sandbox'), { runtime }));
    assert.equal(results[0]?.status, 'resolved', String(results[0]?.reason));
    assert.equal(results[0]?.environment, cached.name);
    const [minitest, python, file, cacheWrite] = (seen[0] ?? '').trim().split('\n');
    assert.equal(minitest, '/polar/scratch/polar-env/bin/minitest');
    assert.equal(python, '/polar/scratch/polar-env/bin/python');
    assert.equal(file, '/testbed/src/minitest/__init__.py');
    assert.equal(cacheWrite, 'cache-read-only');
    assert.equal(existsSync(join(cached.dir, 'polar-agent-was-here')), false);
    const patch = readFileSync(String(results[0]?.patch_file), 'utf8');
    assert.deepEqual(
      [...patch.matchAll(/^diff --git a\/(\S+)/gm)].map((m) => m[1]),
      ['src/minitest/skipping.py'],
    );
  },
);
