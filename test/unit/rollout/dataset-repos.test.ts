/**
 * A dataset's repositories where a user expects them (issue 47 item 2): with no --repos, `polar eval`
 * looks in `repos/` beside the dataset file (not the current directory), and a dataset that ships its
 * repositories as source trees (`src/<owner>/<name>/` beside it, as fixtures/swe/ does) has them made
 * there on first use, at the commit its rows name. On a fresh clone the documented
 * `polar eval --dataset fixtures/swe/mini.jsonl --agent gold` used to exit 4: "no repository under
 * fixtures/swe/repos" (the test suite made them).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  commitTree,
  ensureDatasetRepos,
  REPOS_DEFAULT_SHOWN,
  reposFor,
} from '../../../src/rollout/dataset-repos.ts';
import { ROOT, runPolar } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';
import { gitHead, miniRows } from './run/helpers.ts';

const JS_IDS = 'polar-fixtures__jsutil-5,polar-fixtures__qs-lite-7';

/** fixtures/swe's dataset and its sources, copied into a fresh folder (nothing built). */
function copyOfFixtures(): string {
  const data = join(tempDir('polar-dataset-repos-'), 'data');
  mkdirSync(data);
  cpSync(join(ROOT, 'fixtures/swe/mini.jsonl'), join(data, 'mini.jsonl'));
  cpSync(join(ROOT, 'fixtures/swe/src'), join(data, 'src'), { recursive: true });
  return data;
}

describe('a dataset’s repositories beside it, made on first use from the sources it ships', () => {
  test('polar eval from another folder, no --repos: made in repos/ beside the dataset, gold resolves', async () => {
    const data = copyOfFixtures();
    const elsewhere = join(data, '..', 'elsewhere');
    mkdirSync(elsewhere);
    const args = ['eval', '--dataset', '../data/mini.jsonl', '--agent', 'gold', '--runtime', 'local'];
    const first = await runPolar([...args, '--instances', JS_IDS, '--out', 'gold', '--json'], {
      cwd: elsewhere,
    });
    assert.equal(first.code, 0, first.stderr);
    assert.equal(JSON.parse(first.stdout).pass_at_1.mean, 1);
    assert.match(
      first.stderr,
      /made 2 repositories of \.\.\/data\/mini\.jsonl .* in \.\.\/data\/repos \(first use\)/,
    );
    for (const row of miniRows().filter((r) => JS_IDS.includes(String(r.instance_id))))
      assert.equal(gitHead(join(data, 'repos', String(row.repo))), row.base_commit);
    assert.ok(!existsSync(join(elsewhere, 'repos')), 'nothing made in the current directory');
    // the second run finds them there
    const again = await runPolar([...args, '--instances', JS_IDS, '--out', 'again', '-q'], {
      cwd: elsewhere,
    });
    assert.equal(again.code, 0, again.stderr);
    assert.doesNotMatch(again.stderr, /first use/);
  });

  test('--repos given wins (relative to the current directory), and is where they are made', async () => {
    const data = copyOfFixtures();
    const r = await runPolar(
      ['eval', '--dataset', 'mini.jsonl', '--agent', 'gold', '--runtime', 'local', '--repos', 'mine'].concat([
        '--instances',
        JS_IDS,
        '--out',
        'out',
        '-q',
      ]),
      { cwd: data },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.ok(existsSync(join(data, 'mine', 'polar-fixtures', 'jsutil', '.git')));
    assert.ok(!existsSync(join(data, 'repos')));
    assert.equal(reposFor('x', 'd.jsonl'), 'x');
    assert.equal(reposFor(undefined, join(data, 'mini.jsonl')), join(data, 'repos'));
    assert.equal(reposFor(undefined, 'princeton-nlp/SWE-bench_Verified'), 'repos');
    assert.match(REPOS_DEFAULT_SHOWN, /beside the dataset/);
  });

  test('a row’s own grader runs in the dataset’s folder: its relative path is the dataset’s', async () => {
    const data = copyOfFixtures();
    const row = JSON.parse(readFileSync(join(data, 'mini.jsonl'), 'utf8').split('\n')[4]!);
    assert.equal(row.instance_id, 'polar-fixtures__jsutil-5');
    writeFileSync(join(data, 'graded.jsonl'), `${JSON.stringify({ ...row, grader: 'node check.mjs' })}\n`);
    writeFileSync(join(data, 'check.mjs'), 'console.log(process.cwd().endsWith("/data") ? 1 : 0);\n');
    const elsewhere = join(data, '..', 'elsewhere');
    mkdirSync(elsewhere);
    const r = await runPolar(
      ['eval', '--dataset', '../data/graded.jsonl', '--agent', 'gold', '--runtime', 'local', '--json', '-q'],
      { cwd: elsewhere },
    );
    assert.equal(r.code, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    assert.equal(report.counts.error, 0, r.stderr);
    assert.equal(report.pass_at_1.mean, 1, 'check.mjs found beside the dataset, and run there');
  });

  test('a repository that is there is kept; one without the rows’ commit is named with the fix', () => {
    const data = copyOfFixtures();
    const rows = miniRows().map((r) => ({
      repo: String(r.repo),
      base_commit: String(r.base_commit),
      instance_id: String(r.instance_id),
    }));
    const dataset = join(data, 'mini.jsonl');
    const repos = join(data, 'repos');
    assert.equal(ensureDatasetRepos(dataset, repos, rows).length, 4);
    assert.deepEqual(ensureDatasetRepos(dataset, repos, rows), [], 'made once');
    // the sources changed after the rows were written: the commit differs
    writeFileSync(join(data, 'src/polar-fixtures/jsutil/README.md'), 'changed\n');
    const fresh = join(data, 'repos-2');
    assert.throws(
      () => ensureDatasetRepos(dataset, fresh, rows),
      (e: Error & { hint?: string }) =>
        /polar-fixtures__jsutil-5: base_commit: 8ca6fba\w+ is not in .*jsutil, made from/.test(e.message) &&
        /the sources changed after the dataset was written/.test(e.hint ?? ''),
    );
    // a repository there already (the user's, or made before) that lacks the commit: never replaced
    assert.throws(
      () => ensureDatasetRepos(dataset, fresh, rows),
      (e: Error & { hint?: string }) =>
        /remove .*repos-2\/polar-fixtures\/jsutil: polar makes it again/.test(e.hint ?? ''),
    );
  });

  test('a symbolic link in a source tree is refused, not followed', () => {
    const data = copyOfFixtures();
    symlinkSync('/etc/hostname', join(data, 'src/polar-fixtures/jsutil/host'));
    assert.throws(
      () => commitTree(join(data, 'src/polar-fixtures/jsutil'), join(data, 'repos/polar-fixtures/jsutil')),
      /a symbolic link in a repository source tree/,
    );
    assert.ok(!existsSync(join(data, 'repos/polar-fixtures/jsutil')));
  });

  test('two processes making the same repository at once: one whole repository, the same commit', async () => {
    const data = copyOfFixtures();
    const target = join(data, 'repos/polar-fixtures/jsutil');
    const code = `import { commitTree } from ${JSON.stringify(join(ROOT, 'src/rollout/dataset-repos.ts'))};
process.stdout.write(commitTree(${JSON.stringify(join(data, 'src/polar-fixtures/jsutil'))}, ${JSON.stringify(target)}));`;
    const one = () =>
      new Promise<string>((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
          cwd: ROOT,
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let out = '';
        child.stdout.on('data', (d) => {
          out += d;
        });
        child.on('error', reject);
        child.on('close', (c) => (c === 0 ? resolve(out) : reject(new Error(`exit ${c}`))));
      });
    const heads = await Promise.all([one(), one(), one()]);
    const row = miniRows().find((r) => r.repo === 'polar-fixtures/jsutil')!;
    assert.deepEqual(heads, [row.base_commit, row.base_commit, row.base_commit]);
    assert.equal(gitHead(target), row.base_commit);
    assert.equal(
      readFileSync(join(target, 'package.json'), 'utf8'),
      readFileSync(join(data, 'src/polar-fixtures/jsutil/package.json'), 'utf8'),
    );
  });
});
