/**
 * Environments in the shapes real SWE-bench Verified repositories have (fixtures/swe/shapes.jsonl):
 * - polar-fixtures/blueprints (pallets__flask-5014's shape): a `[build-system]` whose backend
 *   (polar-fixture-backend, a wheel in fixtures/swe/wheels/ standing in for an index) pip's build isolation
 *   must fetch. Before: the sandbox (no network) failed the install of gold and empty alike, "the install
 *   step fails on the unpatched tree too"; now the environment's wheelhouse holds it and the install runs
 *   offline. A wheelhouse without it makes the error name the requirement in pip's words.
 * - polar-fixtures/oldrunner (pytest-dev__pytest-7432's shape on Python >= 3.10): a test runner that crashes
 *   before it collects a test. Before: gold `unresolved`, reward 0, no warning; now the environment fails
 *   validation and every sample of it is an `error`, excluded from pass@1 and counted apart.
 * And two bugs met on the way: a relative --env-cache broke every sandboxed sample; two versions whose
 * specs read alike shared one environment named by the first version (sympy 1.7 / 1.12).
 * pip is offline on the fixture wheels (helpers.ts offlinePip).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { probeSandbox } from '../../../src/rollout/runtime/probe.ts';
import { runPolarSync } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';
import { envFixtures, offlinePip, polar, REPOS, ROOT } from '../rollout/run/helpers.ts';

const SHAPES = join(ROOT, 'fixtures/swe/shapes.jsonl');
const BLUEPRINTS = 'polar-fixtures__blueprints-10';
const OLDRUNNER = 'polar-fixtures__oldrunner-11';
const tmp = tempDir('polar-shapes-');
const cache = join(tmp, 'cache');
const sandbox = await probeSandbox();
const noSandbox = sandbox.ok ? false : `bubblewrap does not work here: ${sandbox.error}`;
// the crash needs Python 3.10 or later (python3 on PATH builds the fixture's environment)
const python3 = spawnSync('python3', ['-c', 'import sys; print(sys.version_info >= (3, 10))'], {
  encoding: 'utf8',
});
const oldPython =
  python3.stdout.trim() === 'True' ? false : 'python3 is older than 3.10: the runner does not crash';

const rows = () =>
  readFileSync(SHAPES, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

function dataset(name: string, lines: Array<Record<string, unknown>>): string {
  const path = join(tmp, `${name}.jsonl`);
  writeFileSync(path, lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
  return path;
}

function evalRun(data: string, agent: string, out: string, extra: string[] = [], cwd?: string) {
  const r = runPolarSync(
    [
      'eval',
      '--dataset',
      data,
      '--agent',
      agent,
      '--grade-empty-patches',
      '--repos',
      REPOS,
      '--out',
      join(tmp, out),
      ...(extra.includes('--env-cache') ? [] : ['--env-cache', cache]),
      ...extra,
    ],
    { env: offlinePip(), ...(cwd ? { cwd } : {}) },
  );
  const file = join(tmp, out, 'results.jsonl');
  const lines = existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>)
    : [];
  const report = existsSync(join(tmp, out, 'report.json'))
    ? (JSON.parse(readFileSync(join(tmp, out, 'report.json'), 'utf8')) as Record<string, unknown>)
    : null;
  return { ...r, lines, report };
}

before(() => envFixtures());

test(
  'a [build-system] project in the sandbox: its build requirement is fetched into the wheelhouse when the environment is used, and the install runs offline: gold resolves, empty does not',
  { skip: noSandbox },
  () => {
    const gold = evalRun(SHAPES, 'gold', 'bp-gold', ['--instances', BLUEPRINTS]);
    assert.equal(gold.code, 0, gold.stderr);
    assert.equal(gold.lines[0]?.status, 'resolved', String(gold.lines[0]?.reason));
    assert.match(
      gold.stderr,
      /fetching the build requirements polar-fixture-backend==1\.0 into its wheelhouse/,
    );
    const env = join(cache, String(gold.lines[0]?.environment));
    const wheelhouse = join(env, 'wheelhouse');
    assert.ok(readdirSync(wheelhouse).includes('polar_fixture_backend-1.0-py3-none-any.whl'));
    const record = JSON.parse(readFileSync(join(wheelhouse, 'polar-wheelhouse.json'), 'utf8'));
    assert.deepEqual(
      Object.values(record.sets).map((s) => (s as { requirements: string[] }).requirements),
      [['polar-fixture-backend==1.0']],
    );
    // pip in the sandbox looked nowhere but the wheelhouse: in the sample's log, or in the log of the
    // install the sample replayed (the validation's, made in the sandbox too; install-memo.ts)
    const log = readFileSync(join(tmp, 'bp-gold', 'logs', `${BLUEPRINTS}__s0.test.log`), 'utf8');
    const replayed = /\(replayed: .*, its log (\S+\/install\.log)\)/.exec(log);
    assert.match(
      replayed ? readFileSync(replayed[1]!, 'utf8') : log,
      new RegExp(`Looking in links: ${wheelhouse.replaceAll('.', '\\.')}`),
    );
    // the environment was validated with the same gold patch, and said so
    const verdicts = JSON.parse(readFileSync(join(env, 'polar-validation.json'), 'utf8'));
    assert.deepEqual(
      Object.values(verdicts.verdicts).map((v) => [
        (v as { valid: boolean }).valid,
        (v as { mode: string }).mode,
      ]),
      [[true, 'gold']],
    );

    const empty = evalRun(SHAPES, 'empty', 'bp-empty', ['--instances', BLUEPRINTS]);
    assert.equal(empty.code, 0, empty.stderr);
    assert.equal(empty.lines[0]?.status, 'unresolved');
    assert.match(
      String(empty.lines[0]?.reason),
      /FAIL_TO_PASS failed \(tests\/test_blueprints\.py::test_empty_name_not_allowed\)/,
    );
    assert.doesNotMatch(
      empty.stderr,
      /fetching the build requirements|validating/,
      'fetched and validated once',
    );
  },
);

test(
  "a build requirement the wheelhouse lacks: the sample's error names it in pip's words, as a build requirement",
  { skip: noSandbox },
  () => {
    const first = evalRun(SHAPES, 'gold', 'bp-gold-2', ['--instances', BLUEPRINTS]);
    const wheelhouse = join(cache, String(first.lines[0]?.environment), 'wheelhouse');
    rmSync(join(wheelhouse, 'polar_fixture_backend-1.0-py3-none-any.whl'));
    // and the install kept from when it was there (install-memo.ts), which would be replayed without it
    rmSync(join(wheelhouse, '..', 'install-memo'), { recursive: true, force: true });
    try {
      const r = evalRun(SHAPES, 'empty', 'bp-missing', ['--instances', BLUEPRINTS]);
      assert.equal(r.lines[0]?.status, 'error');
      assert.match(
        String(r.lines[0]?.reason),
        /the install step fails on the unpatched tree too \(install: python -m pip install -e \. \(exit 1\)\): a build requirement is missing: pip cannot install polar-fixture-backend==1\.0 \(versions it can find: none\)/,
      );
    } finally {
      // the next test's runs find it again
      const wheels = readdirSync(join(ROOT, 'fixtures/swe/wheels'));
      assert.ok(wheels.includes('polar_fixture_backend-1.0-py3-none-any.whl'));
      writeFileSync(
        join(wheelhouse, 'polar_fixture_backend-1.0-py3-none-any.whl'),
        readFileSync(join(ROOT, 'fixtures/swe/wheels/polar_fixture_backend-1.0-py3-none-any.whl')),
      );
    }
  },
);

test(
  "a test runner that crashes on the environment's Python before it collects: the environment fails validation, its samples are errors naming it and the failing tests, counted apart, never 0",
  { skip: noSandbox || oldPython },
  () => {
    for (const agent of ['gold', 'empty']) {
      const r = evalRun(SHAPES, agent, `old-${agent}`, ['--instances', OLDRUNNER]);
      assert.equal(r.code, 1, r.stderr);
      const line = r.lines[0]!;
      assert.equal(line.status, 'error');
      assert.equal(line.reward, null);
      assert.equal(line.excluded, 'invalid_environment');
      assert.match(String(line.environment), /^polar-fixtures__oldrunner-5\.4-[0-9a-f]{12}$/);
      assert.match(
        String(line.reason),
        /^environment polar-fixtures__oldrunner-5\.4-[0-9a-f]{12} failed validation: the gold patch of polar-fixtures__oldrunner-11 was unresolved .*failing: testing\/test_skipping\.py::test_location_runxfail, testing\/test_skipping\.py::test_location; the test run said: TypeError: required field "lineno" missing from alias$/,
      );
      const excluded = (r.report?.excluded as { invalid_environment: Record<string, unknown> })
        .invalid_environment;
      assert.equal(excluded.instances, 1);
      assert.equal(excluded.samples, 1);
      assert.equal((r.report?.pass_at_1 as { mean: unknown }).mean, null);
      assert.deepEqual(r.report?.errors, []);
      assert.match(r.stdout, /excluded: 1 instances \(1 samples\) whose environment failed validation/);
    }
  },
);

test(
  'polar env build --validate: a table per (repository, version), built, validated, time, why not; exit 4 when one is invalid',
  { skip: noSandbox || oldPython },
  () => {
    const r = polar(
      ['env', 'build', '--dataset', SHAPES, '--repos', REPOS, '--env-cache', cache, '--validate'],
      offlinePip(),
    );
    assert.equal(r.code, 4, r.stderr);
    const [head, bp, old] = r.stdout.split('\n');
    assert.match(String(head), /^repository\s+version\s+built\s+validated\s+time\s+why not$/);
    assert.match(String(bp), /^polar-fixtures\/blueprints\s+2\.3\s+cached\s+yes\s+\d+s$/);
    assert.match(
      String(old),
      /^polar-fixtures\/oldrunner\s+5\.4\s+cached\s+NO\s+\d+s\s+environment .* failed validation: /,
    );
    assert.match(r.stdout, /2 environments: 0 built, 2 cached, 0 failed, 1 validated, 1 invalid/);
    const json = polar(
      ['env', 'build', '--dataset', SHAPES, '--repos', REPOS, '--env-cache', cache, '--validate', '--json'],
      offlinePip(),
    );
    const lines = JSON.parse(json.stdout) as Array<{ validation: { valid: boolean; failing: string[] } }>;
    assert.deepEqual(
      lines.map((l) => l.validation.valid),
      [true, false],
    );
    assert.deepEqual(lines[1]?.validation.failing, [
      'testing/test_skipping.py::test_location_runxfail',
      'testing/test_skipping.py::test_location',
    ]);
  },
);

test(
  'a relative --env-cache is made absolute where the flag is read: the sandbox finds the environment',
  { skip: noSandbox },
  () => {
    const cwd = tempDir('polar-shapes-cwd-');
    const r = evalRun(
      SHAPES,
      'gold',
      'relative',
      ['--instances', BLUEPRINTS, '--env-cache', 'rel-envs'],
      cwd,
    );
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.lines[0]?.status, 'resolved', String(r.lines[0]?.reason));
    assert.ok(existsSync(join(cwd, 'rel-envs', String(r.lines[0]?.environment))));
  },
);

test('two versions whose specs read alike get an environment each, named by their own version; env build and eval agree on it', () => {
  const [row] = rows();
  const v22 = { ...row, instance_id: 'polar-fixtures__blueprints-9', version: '2.2' };
  const data = dataset('versions', [row!, v22]);
  const versions = join(tmp, 'versions-cache');
  const built = polar(
    [
      'env',
      'build',
      '--dataset',
      data,
      '--repos',
      REPOS,
      '--env-cache',
      versions,
      '--instances',
      BLUEPRINTS,
      '--json',
    ],
    offlinePip(),
  );
  assert.equal(built.code, 0, built.stderr);
  const [line] = JSON.parse(built.stdout) as Array<{ name: string; status: string }>;
  assert.match(line!.name, /^polar-fixtures__blueprints-2\.3-[0-9a-f]{12}$/);
  const r = evalRun(data, 'empty', 'versions', ['--runtime', 'local', '--env-cache', versions]);
  const byId = Object.fromEntries(r.lines.map((l) => [l.instance_id, l.environment]));
  assert.equal(byId[BLUEPRINTS], line!.name, 'eval uses the environment env build made');
  assert.match(
    String(byId['polar-fixtures__blueprints-9']),
    /^polar-fixtures__blueprints-2\.2-[0-9a-f]{12}$/,
  );
  // one build in eval: the 2.2 one
  assert.equal(r.stderr.match(/: building with Python/g)?.length, 1, r.stderr);
});
