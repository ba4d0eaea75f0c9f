/**
 * No future history (issue 23 item 4): the agent's repository holds nothing that is not an ancestor of
 * base_commit. A source repository with the fix committed after base (plus a tag, a branch, a stash, a
 * note and a dangling commit) is checked out by the local runtime and stripped in place as a container
 * image's /testbed is; an agent's hunt (git log --all, reflog, fsck, cat-file of the fix, the
 * alternates) finds nothing. The old `git clone --shared` checkout is shown to leak, so the test fails
 * on the old code.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadDataset } from '../../../src/rollout/dataset.ts';
import { execTree, gitEnv } from '../../../src/rollout/exec.ts';
import { HistoryStore, scrubLines } from '../../../src/rollout/runtime/history.ts';
import { LocalRuntime } from '../../../src/rollout/runtime/local.ts';
import { futureRepos, hunterScript } from '../../support/future-repo.ts';
import { tempDir } from '../../support/temp.ts';
import { MINI } from './run/helpers.ts';

const TASK = 'polar-fixtures__jsutil-5';

function assertNoFuture(output: string, source: string): void {
  assert.doesNotMatch(
    output,
    /FUTURE-FIX|dangling future commit|v9\.9\.9|future-work|WIP\.txt|next commit/,
    output,
  );
  assert.match(output, /== cat-file\n(fatal|error): /, 'the fix commit cannot be read');
  assert.ok(!output.includes(source), 'nothing points at the source repository');
}

describe('no future history', () => {
  const future = futureRepos(TASK);
  const gitconfig = join(tempDir('polar-history-test-'), 'gitconfig');
  writeFileSync(gitconfig, '');

  test('the old checkout (clone --shared of the source, refs deleted) leaks the fix: what the test catches', async () => {
    const [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === TASK);
    const dir = join(tempDir('polar-history-old-'), 'repo');
    const source = join(future.reposDir, instance!.repo);
    const script = [
      'set -e',
      'git clone -q --shared --no-checkout "$1" "$2"',
      'cd "$2"',
      'git checkout -q --detach "$3"',
      'git remote remove origin',
      'git for-each-ref --format="delete %(refname)" refs/heads refs/tags | git update-ref --stdin',
    ].join('\n');
    const prepared = await execTree('bash', ['-c', script, 'old', source, dir, instance!.base_commit], {
      env: gitEnv(gitconfig),
    });
    assert.equal(prepared.exitCode, 0, prepared.output);
    const hunt = await execTree('bash', ['-c', hunterScript(future.fixSha, null)], {
      cwd: dir,
      env: gitEnv(gitconfig),
    });
    assert.match(hunt.output, /FUTURE-FIX/, 'the old checkout reads the fix through its alternates');
  });

  test('local runtime: the checkout holds base_commit and its ancestors only, alternates into the history repository', async () => {
    const [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === TASK);
    const history = new HistoryStore();
    const runtime = new LocalRuntime({ reposDir: future.reposDir, history });
    const env = await runtime.prepare(instance!, 'agent');
    try {
      const head = await env.exec('git rev-parse HEAD; git status --porcelain | wc -l');
      assert.equal(head.output.trim(), `${instance!.base_commit}\n0`);
      // the tags of base's ancestors stay (setuptools-scm), the later one does not
      const tags = await env.exec('git tag; git describe --tags');
      assert.equal(tags.output.trim(), 'v1.0.0\nv1.0.0', tags.output);
      const hunt = await env.exec(hunterScript(future.fixSha, null));
      assertNoFuture(hunt.output, future.reposDir);
      const alternates = readFileSync(join(env.workdir, '.git/objects/info/alternates'), 'utf8').trim();
      assert.match(alternates, /polar-history-[^/]+\/[0-9a-f]{16}-[0-9a-f]{40}\.git\/objects$/);
      // the history repository itself: the ancestors of base only
      const all = execFileSync('git', ['--git-dir', join(alternates, '..'), 'rev-list', '--all'], {
        encoding: 'utf8',
      });
      assert.deepEqual(all.trim().split('\n'), [instance!.base_commit]);
    } finally {
      await env.dispose();
    }
  });

  test('a container image: the in-place scrub leaves HEAD and its ancestors only', async () => {
    // a full clone, as SWE-bench images held one before PR 471: origin, tags, the fix on main
    const dir = join(tempDir('polar-history-image-'), 'testbed');
    const [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === TASK);
    execFileSync('git', ['clone', '-q', join(future.reposDir, instance!.repo), dir], {
      env: gitEnv(gitconfig),
    });
    execFileSync('git', ['-C', dir, 'reset', '-q', '--hard', instance!.base_commit], {
      env: gitEnv(gitconfig),
    });
    const before = await execTree('bash', ['-c', hunterScript(future.fixSha, null)], {
      cwd: dir,
      env: gitEnv(gitconfig),
    });
    assert.match(before.output, /FUTURE-FIX/, 'the image leaks before the scrub');
    const scrub = await execTree('bash', ['-c', `set -e\n${scrubLines(dir).join('\n')}`], {
      env: gitEnv(gitconfig),
    });
    assert.equal(scrub.exitCode, 0, scrub.output);
    const hunt = await execTree('bash', ['-c', hunterScript(future.fixSha, null)], {
      cwd: dir,
      env: gitEnv(gitconfig),
    });
    assertNoFuture(hunt.output, future.reposDir);
    assert.equal(existsSync(join(dir, '.git/logs')), false, 'no reflog');
  });

  test('history repositories are made once per (source, base) and removed when idle beyond the kept number', async () => {
    const [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === TASK);
    const store = new HistoryStore({ keep: 0 });
    const source = join(future.reposDir, instance!.repo);
    const [a, b] = await Promise.all([
      store.acquire(source, instance!.base_commit),
      store.acquire(source, instance!.base_commit),
    ]);
    assert.equal(a.path, b.path, 'one history repository for both');
    a.release();
    assert.ok(existsSync(a.path), 'still in use by b');
    b.release();
    // removed in the background (release is synchronous): wait for it, up to 20 s on a loaded machine
    for (let i = 0; i < 200 && existsSync(a.path); i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(existsSync(a.path), false, 'idle and beyond keep: removed');
    await assert.rejects(store.acquire(source, 'f'.repeat(40)), /cannot take the history of f{40}/);
  });
});
