/**
 * polar's parsers and log evaluation against the OFFICIAL harness, test id for test id: every log in
 * fixtures/swe-logs/logs was produced by a real runner (scripts/regen-swe-logs.sh), and its expected
 * map in fixtures/swe-logs/expected was produced by running the official code itself
 * (SWE-bench/SWE-bench grading.get_logs_eval + log_parsers/python.py at v4.1.0 and v5.0.1;
 * scripts/swe-expected.py). Each file names the official commit it came from.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ENV_YML_PATHS, officialEnv, REQUIREMENTS_PATHS } from '../../../src/rollout/env/official.ts';
import { getLogParser } from '../../../src/rollout/log-parsers/index.ts';
import type { ParserVersion } from '../../../src/rollout/log-parsers/types.ts';
import { evaluateLog, resolve } from '../../../src/rollout/resolve.ts';
import { REPO_SPECS, testDirectives } from '../../../src/rollout/specs.ts';
import { ROOT } from '../../support/cli.ts';

const DIR = join(ROOT, 'fixtures/swe-logs');
const VERSIONS: Record<string, ParserVersion> = { 'v4.1.0': '4.1', 'v5.0.1': '5' };

interface Expected {
  log: string;
  official: Record<
    string,
    { commit: string; get_logs_eval: Record<string, { found: boolean; tests: Record<string, string> }> }
  >;
}

const files = readdirSync(join(DIR, 'expected')).filter((f) => f.endsWith('.json'));

test('every fixture log has an expected map from both official versions', () => {
  const logs = readdirSync(join(DIR, 'logs')).filter((f) => f.endsWith('.log'));
  assert.ok(logs.length >= 12, `only ${logs.length} logs`);
  assert.deepEqual(files.map((f) => f.replace(/\.json$/, '.log')).sort(), logs.sort());
});

for (const file of files) {
  const expected = JSON.parse(readFileSync(join(DIR, 'expected', file), 'utf8')) as Expected;
  const content = readFileSync(join(DIR, 'logs', expected.log), 'utf8');
  test(`${expected.log}: every parser agrees with the official one on every id`, () => {
    assert.deepEqual(Object.keys(expected.official).sort(), ['v4.1.0', 'v5.0.1']);
    let ids = 0;
    for (const [tag, { get_logs_eval }] of Object.entries(expected.official)) {
      assert.ok(Object.keys(get_logs_eval).length >= 7);
      for (const [fn, want] of Object.entries(get_logs_eval)) {
        const parser = getLogParser(fn);
        assert.ok(parser, `no parser for ${fn}`);
        const got = evaluateLog(content, parser, VERSIONS[tag]!);
        assert.equal(got.found, want.found, `${tag} ${fn}: found (${got.reason})`);
        assert.deepEqual(Object.fromEntries(got.tests), want.tests, `${tag} ${fn}`);
        ids += Object.keys(want.tests).length;
      }
    }
    // a log no parser reads proves nothing: the fixtures must hold ids
    assert.ok(ids > 0);
  });
}

interface Decision {
  eval_type: 'pass_and_fail' | 'fail_only';
  FAIL_TO_PASS: { success: string[]; failure: string[] };
  PASS_TO_PASS: { success: string[]; failure: string[] };
  resolved: boolean;
}

test('resolution rules agree with the official get_eval_tests_report on 300 random cases (v4.1.0, v5.0.1, both eval types)', () => {
  const doc = JSON.parse(readFileSync(join(DIR, 'resolution.json'), 'utf8')) as {
    cases: Array<{ tests: Record<string, string>; f2p: string[]; p2p: string[] }>;
    official: Record<string, { commit: string; decisions: Decision[] }>;
  };
  assert.equal(doc.cases.length, 300);
  let resolvedCount = 0;
  for (const [tag, { decisions }] of Object.entries(doc.official)) {
    assert.equal(decisions.length, doc.cases.length * 2);
    decisions.forEach((want, i) => {
      const c = doc.cases[Math.floor(i / 2)]!;
      const got = resolve({ FAIL_TO_PASS: c.f2p, PASS_TO_PASS: c.p2p }, new Map(Object.entries(c.tests)), {
        version: VERSIONS[tag]!,
        evalType: want.eval_type,
      });
      const where = `${tag} case ${Math.floor(i / 2)} ${want.eval_type}`;
      assert.deepEqual(got.fail_to_pass.passed, want.FAIL_TO_PASS.success, where);
      assert.deepEqual(got.fail_to_pass.failed, want.FAIL_TO_PASS.failure, where);
      assert.deepEqual(got.pass_to_pass.passed, want.PASS_TO_PASS.success, where);
      assert.deepEqual(got.pass_to_pass.failed, want.PASS_TO_PASS.failure, where);
      assert.equal(got.resolved, want.resolved, where);
      if (want.resolved) resolvedCount++;
    });
  }
  // both outcomes are well represented, so the comparison can tell rules apart
  assert.ok(resolvedCount > 300 && resolvedCount < 900, String(resolvedCount));
});

test('specs: test command, install and eval_commands of every Verified repository and version, and the test directives, as v4.1.0 has them', () => {
  const doc = JSON.parse(readFileSync(join(DIR, 'specs.json'), 'utf8')) as {
    tag: string;
    specs: Record<
      string,
      Record<string, { test_cmd: string; install: string | null; eval_commands: string[] }>
    >;
    directives: Array<{ repo: string; test_patch: string; directives: string[] }>;
  };
  assert.equal(doc.tag, 'v4.1.0');
  assert.deepEqual(Object.keys(doc.specs).sort(), Object.keys(REPO_SPECS).sort());
  let versions = 0;
  for (const [repo, byVersion] of Object.entries(doc.specs)) {
    for (const [version, want] of Object.entries(byVersion)) {
      const got = REPO_SPECS[repo]!.spec(version);
      assert.equal(got.cmd, want.test_cmd, `${repo} ${version}`);
      assert.equal(officialEnv(repo, version)?.install ?? null, want.install, `${repo} ${version}`);
      assert.deepEqual(got.evalCommands ?? [], want.eval_commands, `${repo} ${version}`);
      versions++;
    }
  }
  assert.ok(versions > 150, String(versions));
  for (const { repo, test_patch, directives } of doc.directives) {
    assert.deepEqual(testDirectives(test_patch, REPO_SPECS[repo]!.directives ?? 'paths'), directives, repo);
  }
});

test('environments: python, packages, pip_packages, pre_install and install of every Verified repository and version, and where requirement files are read, as v4.1.0 has them', () => {
  type Env = {
    python: string;
    packages: string | null;
    pip_packages: string[];
    pre_install: string[];
    install: string | null;
  };
  const doc = JSON.parse(readFileSync(join(DIR, 'specs.json'), 'utf8')) as {
    specs: Record<string, Record<string, Env>>;
    paths: Record<string, { requirements: string[]; environment_yml: string[] }>;
  };
  let versions = 0;
  for (const [repo, byVersion] of Object.entries(doc.specs)) {
    for (const [version, want] of Object.entries(byVersion)) {
      const got = officialEnv(repo, version);
      assert.ok(got, `${repo} ${version}: no environment`);
      const where = `${repo} ${version}`;
      assert.equal(got.python, want.python, where);
      assert.equal(got.packages ?? null, want.packages, where);
      assert.deepEqual(got.pip_packages ?? [], want.pip_packages, where);
      assert.deepEqual(got.pre_install ?? [], want.pre_install, where);
      assert.equal(got.install, want.install, where);
      versions++;
    }
  }
  assert.ok(versions > 150, String(versions));
  assert.equal(officialEnv('pytest-dev/pytest', '99.0'), null);
  for (const [repo, want] of Object.entries(doc.paths)) {
    assert.deepEqual(REQUIREMENTS_PATHS[repo] ?? [], want.requirements, repo);
    assert.deepEqual(ENV_YML_PATHS[repo] ?? [], want.environment_yml, repo);
  }
});
