/**
 * Issue 43, item 2: a requirement is a requirement. The entries pip would take as options, URLs or paths
 * (each of which made pip read a host file or build and run code a row chose) are refused, wherever the
 * list comes from: a dataset row (polar eval's file, a gym row), the official specs, a repository's
 * requirements file. Every requirement of polar's own official table passes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InputError } from '../../../src/errors.ts';
import { parseRow } from '../../../src/rollout/dataset.ts';
import { condaListRequirements } from '../../../src/rollout/env/conda.ts';
import { officialEnv, officialEnvVersions } from '../../../src/rollout/env/official.ts';
import { checkedRequirements } from '../../../src/rollout/env/recipe.ts';
import { EnvBuildError, type EnvRecipe } from '../../../src/rollout/env/types.ts';
import { requirementProblem } from '../../../src/util/requirement.ts';

const REFUSED = [
  '-r',
  '-r /root/secret',
  '--requirement=/root/secret',
  '-c/etc/passwd',
  '-e .',
  '-e git+https://example.com/x.git#egg=x',
  '--index-url=http://127.0.0.1:9/simple',
  '--no-build-isolation',
  '--no-cache-dir',
  'evil @ http://127.0.0.1:8000/evil-0.1.tar.gz',
  'evil@file:///tmp/evil-0.1.tar.gz',
  'evil[x] @ https://example.com/evil.whl',
  'http://127.0.0.1:8000/evil-0.1.tar.gz',
  'file:///tmp/evil-0.1.tar.gz',
  'git+https://github.com/o/r.git',
  'hg+https://example.com/r',
  '/tmp/evil-0.1.tar.gz',
  './evil',
  '../evil',
  '~/evil',
  'sub/dir',
  'evil-0.1.tar.gz',
  'evil-0.1-py3-none-any.whl',
  'evil.zip',
  'numpy; os_name == "posix" and x/y',
  'numpy $(touch /tmp/x)',
  'numpy`id`',
  '',
  '   ',
];

const ACCEPTED = [
  'numpy',
  'numpy==1.19.2',
  'numpy==1.19.*',
  'pytest>=6,<8',
  'pytest >= 6, < 8',
  'requests[security,socks]==2.31.0',
  'setuptools<=58.0',
  'types-setuptools',
  'zope.interface~=5.0',
  'foo===1.0+local',
  'importlib-metadata; python_version < "3.8"',
  "pywin32>=1.0 ; sys_platform == 'win32' and platform_machine != 'ARM64'",
  'Django (>=3.2)',
  'numpy  # pinned below',
];

test('pip options, URLs, paths and archives are refused; requirements (name, extras, version, marker) pass', () => {
  for (const entry of REFUSED) assert.notEqual(requirementProblem(entry), null, JSON.stringify(entry));
  for (const entry of ACCEPTED) assert.equal(requirementProblem(entry), null, JSON.stringify(entry));
  assert.match(String(requirementProblem('-r')), /pip option/);
  assert.match(String(requirementProblem('evil @ http://x/e.tgz')), /URL/);
  assert.match(String(requirementProblem('/tmp/e.tgz')), /path/);
});

test("every requirement of polar's official specs is a requirement", () => {
  let checked = 0;
  for (const [repo, versions] of Object.entries(officialEnvVersions())) {
    for (const version of versions) {
      const spec = officialEnv(repo, version)!;
      const lists = [spec.pip_packages ?? []];
      if (spec.packages && !['requirements.txt', 'environment.yml'].includes(spec.packages))
        lists.push(condaListRequirements(spec.packages).requirements);
      for (const entry of lists.flat()) {
        assert.equal(requirementProblem(entry), null, `${repo} ${version}: ${entry}`);
        checked++;
      }
    }
  }
  assert.ok(checked > 100, `${checked} requirements checked`);
});

const row = (pip_packages: unknown) => ({
  instance_id: 'o__r-1',
  repo: 'o/r',
  base_commit: 'abcdef1',
  patch: '',
  test_patch: '',
  problem_statement: 'x',
  FAIL_TO_PASS: ['t'],
  PASS_TO_PASS: [],
  pip_packages,
});

test("a dataset row's pip_packages entry that is not a requirement is an error naming the file, line, field and entry", () => {
  assert.throws(
    () => parseRow('rows.jsonl', 3, row(['numpy==1.26', '-r', '/root/secret'])),
    (e: unknown) =>
      e instanceof InputError &&
      /^rows\.jsonl:3: pip_packages: instance o__r-1: entry "-r" is a pip option/.test(e.message),
  );
  // a JSON-encoded list (parquet) is decoded first, then checked
  assert.throws(
    () => parseRow('rows.parquet', 1, row(JSON.stringify(['evil @ file:///tmp/e.tar.gz']))),
    /pip_packages: .*entry "evil @ file:\/\/\/tmp\/e\.tar\.gz" is a URL/,
  );
  assert.deepEqual(parseRow('rows.jsonl', 1, row(['numpy==1.26', 'pytest'])).pip_packages, [
    'numpy==1.26',
    'pytest',
  ]);
});

test("an environment recipe refuses a requirements file's option line, naming the file and the entry", () => {
  const recipe: EnvRecipe = {
    repo: 'o/r',
    version: '1.0',
    source: 'swebench-v4.1.0',
    python: '3.9',
    requirements: ['numpy', '--index-url http://127.0.0.1:9/simple'],
    pipPackages: [],
    preInstall: [],
    systemSteps: [],
    install: null,
    requirementsFrom: 'abc1234:requirements.txt',
    skipped: [],
  };
  assert.throws(
    () => checkedRequirements(recipe),
    (e: unknown) =>
      e instanceof EnvBuildError &&
      e.message ===
        'environment o/r 1.0: the requirements read from abc1234:requirements.txt: entry "--index-url http://127.0.0.1:9/simple" is a pip option, not a requirement',
  );
  const fine = checkedRequirements({ ...recipe, requirements: ['numpy  # why', 'pytest'] });
  assert.deepEqual(fine.requirements, ['numpy', 'pytest']);
});
