import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { gradeLogFile } from '../../../src/grade/command.ts';
import { polarInProcess as polar, ROOT } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';

const DIR = join(ROOT, 'fixtures/swe-logs');
const log = (name: string) => join(DIR, 'logs', name);
// the repository whose official parser each expected map names (v4.1.0 picks the parser by repo)
const REPO_OF: Record<string, [string, string]> = {
  parse_log_pytest: ['pytest-dev/pytest', '8.0'],
  parse_log_pytest_options: ['psf/requests', '2.0'],
  parse_log_pytest_v2: ['astropy/astropy', '5.0'],
  parse_log_seaborn: ['mwaskom/seaborn', '0.12'],
  parse_log_matplotlib: ['matplotlib/matplotlib', '3.5'],
  parse_log_django: ['django/django', '4.0'],
  parse_log_sympy: ['sympy/sympy', '1.12'],
};

test('polar grade --repo gives the official status map of every fixture log (v4.1.0 and v5.0.1)', async () => {
  let checked = 0;
  for (const file of readdirSync(join(DIR, 'expected'))) {
    const expected = JSON.parse(readFileSync(join(DIR, 'expected', file), 'utf8'));
    for (const [tag, officialVersion] of [
      ['v4.1.0', '4.1'],
      ['v5.0.1', '5'],
    ] as const) {
      for (const [fn, [repo, version]] of Object.entries(REPO_OF)) {
        const want = expected.official[tag].get_logs_eval[fn];
        const r = await gradeLogFile(log(expected.log), { repo, version, officialVersion });
        assert.equal(r.found, want.found, `${expected.log} ${tag} ${repo}`);
        assert.deepEqual(r.tests, want.tests, `${expected.log} ${tag} ${repo}`);
        checked++;
      }
    }
  }
  assert.ok(checked >= 12 * 14);
});

test('polar grade CLI: --json, --instance report and resolved, usage errors', async () => {
  const dir = tempDir('polar-grade-');
  const row = {
    instance_id: 'django__django-1',
    repo: 'django/django',
    version: '4.0',
    base_commit: 'abc1234',
    patch: '',
    test_patch: '',
    problem_statement: '',
    FAIL_TO_PASS: JSON.stringify(['Named URLs should be reversible.']),
    PASS_TO_PASS: JSON.stringify([
      'test_plain (gradeapp.tests.ReverseTests.test_plain)',
      'A documented test that fails.',
    ]),
  };
  writeFileSync(join(dir, 'row.json'), JSON.stringify(row));
  const r = await polar(['grade', log('django-runner.log'), '--instance', join(dir, 'row.json'), '--json']);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.tests['Named URLs should be reversible.'], 'PASSED');
  assert.deepEqual(out.FAIL_TO_PASS.passed, ['Named URLs should be reversible.']);
  assert.deepEqual(out.PASS_TO_PASS.failed, ['A documented test that fails.']);
  assert.equal(out.resolved, false);
  const text = await polar(['grade', log('sympy-runner.log'), '--repo', 'sympy/sympy']);
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /^PASSED {3}test_expand$/m);
  const noRepo = await polar(['grade', log('sympy-runner.log')]);
  assert.equal(noRepo.code, 2);
  assert.match(noRepo.stderr, /--repo/);
  const badParser = await polar(['grade', log('sympy-runner.log'), '--repo', 'a/b', '--log-parser', 'nope']);
  assert.equal(badParser.code, 2);
  assert.match(badParser.stderr, /--log-parser nope/);
});

test('polar grade reads a bare runner output (no markers) whole', async () => {
  const dir = tempDir('polar-grade-');
  writeFileSync(join(dir, 'bare.log'), 'collected 2 items\nPASSED t.py::a\nFAILED t.py::b - x\n');
  const r = await gradeLogFile(join(dir, 'bare.log'), { repo: 'pytest-dev/pytest' });
  assert.equal(r.markers, false);
  assert.deepEqual(r.tests, { 't.py::a': 'PASSED', 't.py::b': 'FAILED' });
});
