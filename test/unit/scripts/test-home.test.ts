/**
 * The test runner keeps the tests off the user's HOME and polar cache (issue 47 item 9;
 * scripts/test-home.mjs): scripts/test.mjs runs test files written here with HOME set to a made-up
 * user's home. Each file gets a HOME and polar cache of its own (not the user's, not another file's), pip's
 * configuration by path; and a test that writes into the user's polar cache by a path HOME does not move
 * (as `polar setup` did into ~/.cache/polar/python while exit-codes.test.ts ran) fails the run, naming
 * the path.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
// @ts-expect-error: a plain .mjs script without type declarations
import { differences, snapshot } from '../../../scripts/test-home.mjs';
import { ROOT } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';

/** A test file that records what it sees, writes into its own polar cache, and into REACH when given. */
const PROBE = `
import { mkdirSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
test('probe', () => {
  mkdirSync(join(homedir(), '.cache', 'polar', 'python'), { recursive: true });
  writeFileSync(join(process.env.POLAR_CACHE_DIR, 'mine'), 'x');
  if (process.env.REACH) writeFileSync(process.env.REACH, 'rewritten');
  const seen = { home: homedir(), cache: process.env.POLAR_CACHE_DIR, pip: process.env.PIP_CONFIG_FILE };
  writeFileSync(join(process.env.REPORTS, String(process.pid)), JSON.stringify(seen));
});
`;

interface Seen {
  home: string;
  cache: string;
  pip: string | undefined;
}

/** A made-up user (HOME with a polar cache and a pip.conf) and a runner environment that names only it. */
function user(): { dir: string; home: string; env: Record<string, string> } {
  const dir = tempDir('polar-test-home-');
  const home = join(dir, 'user');
  mkdirSync(join(home, '.cache', 'polar', 'python', 'bin'), { recursive: true });
  writeFileSync(join(home, '.cache', 'polar', 'python', 'bin', 'python'), '#!/bin/sh\n');
  mkdirSync(join(home, '.config', 'pip'), { recursive: true });
  writeFileSync(join(home, '.config', 'pip', 'pip.conf'), '[global]\n');
  mkdirSync(join(dir, 'reports'));
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    // the runner's and node --test's own variables: the nested runner starts as a user starts it
    if (v === undefined || /^(POLAR_|XDG_|PIP_CONFIG_FILE$|NODE_TEST_CONTEXT$)/.test(k)) continue;
    env[k] = v;
  }
  return { dir, home, env: { ...env, HOME: home, REPORTS: join(dir, 'reports') } };
}

function runner(files: string[], env: Record<string, string>) {
  return spawnSync(process.execPath, [join(ROOT, 'scripts/test.mjs'), ...files], {
    cwd: ROOT,
    env,
    encoding: 'utf8',
    timeout: 120_000,
  });
}

const seen = (dir: string): Seen[] =>
  readdirSync(join(dir, 'reports')).map(
    (f) => JSON.parse(readFileSync(join(dir, 'reports', f), 'utf8')) as Seen,
  );

describe('scripts/test.mjs keeps the tests off the user’s HOME and polar cache', () => {
  test('each test file gets a HOME and polar cache of its own; pip keeps the user’s configuration', () => {
    const u = user();
    for (const name of ['a', 'b']) writeFileSync(join(u.dir, `${name}.test.ts`), PROBE);
    const cache = join(u.home, '.cache', 'polar');
    const before = snapshot([cache]);
    const r = runner([join(u.dir, 'a.test.ts'), join(u.dir, 'b.test.ts')], u.env);
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    const files = seen(u.dir);
    assert.equal(files.length, 2);
    for (const s of files) {
      assert.ok(!s.home.startsWith(u.home), `HOME ${s.home} is not the user's ${u.home}`);
      assert.equal(s.cache, join(s.home, '.cache', 'polar'));
      assert.equal(s.pip, join(u.home, '.config', 'pip', 'pip.conf'));
      assert.ok(!existsSync(s.home), `the file's HOME ${s.home} is removed after the run`);
    }
    assert.notEqual(files[0]!.home, files[1]!.home, 'two files, two HOMEs');
    assert.equal(differences(before, snapshot([cache])).total, 0, 'the user’s polar cache is as it was');
  });

  test('a test that writes into the user’s polar cache past HOME fails the run, naming the path', () => {
    const u = user();
    writeFileSync(join(u.dir, 'reach.test.ts'), PROBE);
    const target = join(u.home, '.cache', 'polar', 'python', 'bin', 'python');
    const r = runner([join(u.dir, 'reach.test.ts')], { ...u.env, REACH: target });
    assert.equal(r.status, 1, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /the user's polar cache changed while the tests ran/);
    assert.ok(r.stderr.includes(`changed ${target}`), r.stderr);
    // the test itself passed: the run failed on the check alone
    assert.match(r.stdout, /# pass 1/);
  });

  test('a polar cache the run creates where there was none fails the run too', () => {
    const u = user();
    writeFileSync(join(u.dir, 'reach.test.ts'), PROBE);
    const other = join(u.dir, 'other-cache');
    const r = runner([join(u.dir, 'reach.test.ts')], { ...u.env, POLAR_CACHE_DIR: other, REACH: other });
    assert.equal(r.status, 1, `${r.stdout}\n${r.stderr}`);
    assert.ok(r.stderr.includes(`created ${other}`), r.stderr);
  });
});
