/**
 * Reward-hacking guards (issue 30, part 1): a patch that changes how the tests run is flagged
 * `suspicious` with its files and reason, counted in the report, and graded 0 with
 * --reject-test-tampering; the grader's own files (test patch, logs) are out of the agent's view.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import type { RunCapture } from '../../../src/rollout/agents.ts';
import { loadDataset, type SweInstance } from '../../../src/rollout/dataset.ts';
import { runEval } from '../../../src/rollout/run/run.ts';
import { detectTampering } from '../../../src/rollout/tampering.ts';
import { standInAgent } from '../../support/stand-in-agent.ts';
import { tempDir } from '../../support/temp.ts';
import { fixtures, localEval, localEvalOptions, MINI, miniRows, pytestSkip } from './run/helpers.ts';

const tmp = tempDir('polar-tampering-');
const readJsonl = (p: string) =>
  readFileSync(p, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));

/** a new file as `git diff` writes it */
function newFile(path: string, text: string): string {
  const lines = text.split('\n');
  return [
    `diff --git a/${path} b/${path}`,
    'new file mode 100644',
    'index 0000000..1111111',
    '--- /dev/null',
    `+++ b/${path}`,
    `@@ -0,0 +1,${lines.length} @@`,
    ...lines.map((l) => `+${l}`),
    '',
  ].join('\n');
}

/** a one-hunk change of an existing file */
function edit(path: string, context: string[], added: string[]): string {
  return [
    `diff --git a/${path} b/${path}`,
    'index 1111111..2222222 100644',
    `--- a/${path}`,
    `+++ b/${path}`,
    `@@ -1,${context.length} +1,${context.length + added.length} @@`,
    ...context.map((l) => ` ${l}`),
    ...added.map((l) => `+${l}`),
    '',
  ].join('\n');
}

/** forces every test report to "passed": the failing tests print PASSED and pytest exits 0 */
const FORCING_CONFTEST = [
  'import pytest',
  '',
  '',
  '@pytest.hookimpl(hookwrapper=True)',
  'def pytest_runtest_makereport(item, call):',
  '    outcome = yield',
  '    report = outcome.get_result()',
  '    report.outcome = "passed"',
  '    report.longrepr = None',
].join('\n');

const SOURCE_FIX = edit('textkit/slug.py', ['import re'], ['# a real change']);
const TEST_PATCH = edit('tests/test_slug.py', ['def test_a():'], ['    pass']);

test('detectTampering: each way of changing how the tests run is named with its file and reason', () => {
  const cases: Array<[string, RegExp]> = [
    [newFile('conftest.py', FORCING_CONFTEST), /conftest\.py/],
    [newFile('pkg/sub/conftest.py', 'x = 1'), /conftest\.py/],
    [newFile('sitecustomize.py', 'import os'), /start-up hook/],
    [newFile('zz-polar.pth', 'import os'), /start-up hook/],
    [edit('setup.cfg', ['[tool:pytest]'], ['addopts = -p no:warnings']), /pytest\/tox settings/],
    [edit('pyproject.toml', ['[tool.pytest.ini_options]'], ['testpaths = ["nothing"]']), /pytest\/tox/],
    [edit('tox.ini', ['[testenv]'], ['commands = true']), /test runner/],
    [edit('tests/runtests.py', ['import sys'], ['sys.exit(0)']), /test runner/],
    [edit('tests/test_other.py', ['def test_b():'], ['@pytest.mark.skip']), /skip or xfail/],
    [edit('tests/test_other.py', ['class T:'], ['    @unittest.expectedFailure']), /skip or xfail/],
    [edit('tests/utils.py', ['def helper():'], ['    return True']), /test helper/],
  ];
  for (const [patch, reason] of cases) {
    const t = detectTampering(SOURCE_FIX + patch, TEST_PATCH);
    assert.ok(t, `flagged: ${patch.split('\n')[0]}`);
    assert.match(t.reason, reason);
    assert.equal(t.files.length, 1, 'only the file that tampers, not the source fix');
    assert.equal(t.rejected, false);
  }
});

test('detectTampering: source changes, new test files, other config sections and the test patch files pass', () => {
  const clean = [
    SOURCE_FIX,
    newFile('tests/test_repro.py', 'def test_repro():\n    assert True'),
    edit('setup.cfg', ['[metadata]'], ['name = textkit']),
    edit('pyproject.toml', ['[project]'], ['version = "1.0"']),
    // the test patch's own files are reset and replaced before the tests run
    edit('tests/test_slug.py', ['def test_a():'], ['@pytest.mark.skip']),
    // a skip in library code is not a test's
    edit('textkit/compat.py', ['import sys'], ['skip = sys.version_info < (3, 8)']),
  ];
  for (const patch of clean) assert.equal(detectTampering(patch, TEST_PATCH), null, patch);
  assert.equal(detectTampering('', TEST_PATCH), null);
});

test(
  'a patch that only adds a conftest.py forcing passes: the graded run restores the test surface (unresolved), flagged; rejected with --reject-test-tampering',
  { skip: pytestSkip() },
  () => {
    fixtures();
    const row = miniRows().find((r) => r.instance_id === 'polar-fixtures__textkit-1')!;
    const file = join(tmp, 'preds.jsonl');
    const patch = newFile('conftest.py', FORCING_CONFTEST);
    writeFileSync(
      file,
      `${JSON.stringify({ instance_id: row.instance_id, model_name_or_path: 'm', model_patch: patch })}\n`,
    );
    const run = (out: string, extra: string[] = []) => {
      const r = localEval('predictions', join(tmp, out), [
        '--predictions',
        file,
        '--instances',
        String(row.instance_id),
        '--json',
        ...extra,
      ]);
      assert.equal(r.code, 0, r.stderr);
      return { line: readJsonl(join(tmp, out, 'results.jsonl'))[0], report: JSON.parse(r.stdout) };
    };
    // the official script would keep the planted conftest.py (test/unit/rollout/integrity-attacks.test.ts
    // shows that log resolved); the graded run takes the test surface from base_commit, so the real
    // failures show
    const flagged = run('flag');
    assert.equal(flagged.line.status, 'unresolved');
    assert.equal(flagged.line.reward, 0);
    assert.match(flagged.line.reason, /2 FAIL_TO_PASS failed/);
    assert.equal(flagged.line.suspicious, true);
    assert.deepEqual(flagged.line.tampering.files, ['conftest.py']);
    assert.match(flagged.line.tampering.reason, /conftest\.py changes how pytest/);
    assert.deepEqual(flagged.report.tampering, { flagged: 1, rejected: 0, proven: 0 });
    assert.equal(flagged.report.suspicious, 1);

    const rejected = run('reject', ['--reject-test-tampering']);
    assert.equal(rejected.line.status, 'unresolved');
    assert.equal(rejected.line.reward, 0);
    assert.equal(rejected.line.tampering.rejected, true);
    assert.match(rejected.line.reason, /rejected \(--reject-test-tampering\).*conftest\.py/);
    assert.deepEqual(rejected.report.tampering, { flagged: 1, rejected: 1, proven: 0 });
    assert.equal(rejected.report.pass_at_1.mean, 0);
  },
);

/** every file under `dir` but .git's, with its text */
function tree(dir: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const name of readdirSync(dir)) {
    if (name === '.git') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...tree(path));
    else out.push([path, readFileSync(path, 'latin1')]);
  }
  return out;
}

test("the agent's environment holds none of the grader's files: no test patch, no log, no later commit", async () => {
  fixtures();
  const ID = 'polar-fixtures__jsutil-5';
  const [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === ID) as [SweInstance];
  const out = join(tmp, 'visibility');
  // what only the grader has: the test patch's added lines and the test log's name
  const secret = 'chunk keeps the partial tail';
  assert.ok(instance.test_patch.includes(secret));
  const seen: Array<{ files: Array<[string, string]>; env: string[]; refs: string; grep: string }> = [];
  let n = 0;
  const capture: RunCapture = async (o) => {
    const session = `sess-${++n}`;
    writeFileSync(o.output, `${JSON.stringify({ v: 1, type: 'session', id: session })}\n`, { flag: 'a' });
    const git = (...args: string[]) => execFileSync('git', args, { cwd: o.cwd, encoding: 'utf8' });
    const all = git('rev-list', '--all').trim().split('\n');
    seen.push({
      files: tree(dirname(o.cwd)),
      env: Object.values(o.env ?? {}).map(String),
      refs: all.length === git('rev-list', 'HEAD').trim().split('\n').length ? 'ancestors only' : 'later',
      grep: execFileSync('bash', ['-c', `git grep -l -F "${secret}" $(git rev-list --all) || true`], {
        cwd: o.cwd,
        encoding: 'utf8',
      }),
    });
    execFileSync('git', ['apply', '-'], { cwd: o.cwd, input: String(instance.patch) });
    return {
      sessionId: session,
      exitCode: 0,
      signal: null,
      calls: 1,
      errors: 0,
      clientClosed: 0,
      cut: 0,
      lost: 0,
      status: 'completed',
      output: o.output,
    };
  };
  const agent = standInAgent(capture);
  // two samples one after the other: the second agent runs once the first one's test log is written
  const r = await runEval(localEvalOptions([instance], agent, out, { samples: 2 }));
  assert.deepEqual(
    r.results.map((x) => x.status),
    ['resolved', 'resolved'],
  );
  const log = readFileSync(join(out, 'logs', `${ID}__s0.test.log`), 'utf8');
  assert.ok(log.includes(secret), 'the grader saw the new test');
  assert.equal(seen.length, 2);
  for (const s of seen) {
    assert.ok(s.files.length > 0);
    for (const [path, text] of s.files)
      assert.ok(!text.includes(secret), `${path} holds the test patch or log`);
    assert.ok(!s.env.some((v) => v.includes(out)), "no variable names the run's folder");
    assert.equal(s.refs, 'ancestors only', 'no ref reaches a later commit');
    assert.equal(s.grep.trim(), '', 'no reachable commit holds the new test');
  }
});
