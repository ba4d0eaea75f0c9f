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
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadDataset } from '../../../src/rollout/dataset.ts';
import { execTree, gitEnv } from '../../../src/rollout/exec.ts';
import {
  CHECKOUT_SCRIPT,
  HistoryStore,
  historyKey,
  scrubLines,
} from '../../../src/rollout/runtime/history.ts';
import { HISTORY_RECORD } from '../../../src/rollout/runtime/history-check.ts';
import { LocalRuntime } from '../../../src/rollout/runtime/local.ts';
import { COPY_SCRIPT } from '../../../src/rollout/runtime/tree.ts';
import { futureRepos, hunterScript } from '../../support/future-repo.ts';
import { tempDir } from '../../support/temp.ts';
import { MINI } from './run/helpers.ts';

const TASK = 'polar-fixtures__jsutil-5';

const git = (dir: string, args: string[]) =>
  execFileSync('git', ['--git-dir', dir, ...args], { env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1' } });

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
    const history = new HistoryStore({ cacheDir: tempDir('polar-history-cache-') });
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
      assert.equal(
        alternates,
        join(
          history.cacheDir,
          `${historyKey(join(future.reposDir, instance!.repo), instance!.base_commit)}.git/objects`,
        ),
      );
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

  test('a history repository is made once per (source, base) and machine: concurrent samples and later runs share it', async () => {
    const [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === TASK);
    const cacheDir = tempDir('polar-history-cache-');
    const source = join(future.reposDir, instance!.repo);
    // what a polar killed mid-fetch and mid-checkout left: removed by the next one to make them
    const key = historyKey(source, instance!.base_commit);
    for (const left of [
      `${key}.git.partial-dead01`,
      `${key}.tree.partial-dead02`,
      `${key}.git.rejected-dead03`,
    ]) {
      mkdirSync(join(cacheDir, left, 'objects'), { recursive: true });
      writeFileSync(join(cacheDir, left, 'objects', 'x'), 'left by a killed polar');
    }
    // two runs at once (two stores: two processes' worth), two samples each
    const [a, b, c, d] = await Promise.all([
      new HistoryStore({ cacheDir }).acquire(source, instance!.base_commit),
      new HistoryStore({ cacheDir }).acquire(source, instance!.base_commit),
      new HistoryStore({ cacheDir }).acquire(source, instance!.base_commit),
      new HistoryStore({ cacheDir }).acquire(source, instance!.base_commit),
    ]);
    assert.deepEqual(new Set([a.path, b.path, c.path, d.path]).size, 1, 'one history repository for all');
    const record = readFileSync(join(a.path, HISTORY_RECORD), 'utf8');
    // a later run finds it as it was (not fetched again)
    const later = await new HistoryStore({ cacheDir }).acquire(source, instance!.base_commit);
    assert.equal(later.path, a.path);
    assert.equal(readFileSync(join(a.path, HISTORY_RECORD), 'utf8'), record);
    assert.deepEqual(
      readdirSync(cacheDir).sort(),
      ['.git', '.tree', '.tree.json']
        .map((x) => `${historyKey(source, instance!.base_commit)}${x}`)
        .concat('gitconfig'),
      'no lock, partial or rejected folder left (those a killed polar left, removed)',
    );
    await assert.rejects(
      new HistoryStore({ cacheDir }).acquire(source, 'f'.repeat(40)),
      /cannot take the history of f{40}/,
    );
  });

  /** the ways a commit after base gets into a cached history repository (an agent with the local runtime's rights, a careless copy) */
  const attacks: Array<[string, (history: string, source: string) => void]> = [
    [
      'a fetch of the fix under a branch',
      (h, s) => git(h, ['fetch', '-q', s, `${future.fixSha}:refs/heads/leak`]),
    ],
    [
      'a fetch of the fix with no ref (loose objects)',
      (h, s) => git(h, ['fetch', '-q', '--no-write-fetch-head', s, future.fixSha]),
    ],
    [
      'a pack of the fix copied in',
      (h, s) => {
        const other = join(tempDir('polar-history-pack-'), 'r.git');
        git(other, ['init', '-q', '--bare']);
        git(other, ['-c', 'fetch.unpackLimit=1', 'fetch', '-q', s, `${future.fixSha}:refs/heads/x`]);
        const pack = readdirSync(join(other, 'objects/pack')).filter((f) => /\.(pack|idx)$/.test(f));
        for (const f of pack) copyFileSync(join(other, 'objects/pack', f), join(h, 'objects/pack', f));
      },
    ],
    [
      'an alternates file into the source',
      (h, s) => writeFileSync(join(h, 'objects/info/alternates'), `${s}/.git/objects\n`),
    ],
    ['a tag on the fix', (h, s) => git(h, ['fetch', '-q', s, 'refs/tags/v9.9.9:refs/tags/v9.9.9'])],
  ];
  for (const [name, attack] of attacks) {
    test(`a cached history repository that gained the fix (${name}) is refused and made again: the next sample cannot read the fix`, async () => {
      const [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === TASK);
      const cacheDir = tempDir('polar-history-cache-');
      const source = join(future.reposDir, instance!.repo);
      const first = await new HistoryStore({ cacheDir }).acquire(source, instance!.base_commit);
      attack(first.path, source);
      // the attack works on a history repository that is reused unchecked: a checkout from it reads the fix
      const dir = join(tempDir('polar-history-unchecked-'), 'repo');
      const unchecked = await execTree(
        'bash',
        ['-c', CHECKOUT_SCRIPT, 'x', first.path, dir, instance!.base_commit],
        {
          env: gitEnv(gitconfig),
        },
      );
      assert.equal(unchecked.exitCode, 0, unchecked.output);
      const leak = await execTree('bash', ['-c', hunterScript(future.fixSha, null)], {
        cwd: dir,
        env: gitEnv(gitconfig),
      });
      assert.match(leak.output, /FUTURE-FIX|v9\.9\.9/, 'the unchecked reuse leaks');
      // polar's next sample: the check refuses it, a fresh one is made, the fix is out of reach
      const history = new HistoryStore({ cacheDir });
      const env = await new LocalRuntime({ reposDir: future.reposDir, history }).prepare(instance!, 'agent');
      try {
        const hunt = await env.exec(hunterScript(future.fixSha, null));
        assertNoFuture(hunt.output, future.reposDir);
      } finally {
        await env.dispose();
      }
    });
  }

  /** what an unsandboxed run could leave in the pristine tree every later sample is copied from */
  const treeAttacks: Array<[string, (tree: string) => void]> = [
    [
      'a changed source file (a planted fix)',
      (t) => writeFileSync(join(t, 'src/chunk.js'), 'FUTURE-FIX planted\n'),
    ],
    [
      'a source file changed in place, its size and mtime kept',
      (t) => {
        const file = join(t, 'src/chunk.js');
        const { size, mtime } = statSync(file);
        writeFileSync(file, 'FUTURE-FIX'.padEnd(size, ' '));
        utimesSync(file, mtime, mtime);
      },
    ],
    [
      'an active hook',
      (t) => writeFileSync(join(t, '.git/hooks/post-checkout'), '#!/bin/sh\necho FUTURE-FIX\n'),
    ],
    ['an untracked file', (t) => writeFileSync(join(t, 'FUTURE-FIX.txt'), 'FUTURE-FIX\n')],
  ];
  for (const [name, attack] of treeAttacks) {
    test(`a pristine tree that gained ${name} is refused and made again: the next sample starts from base_commit as it is`, async () => {
      const [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === TASK);
      const history = new HistoryStore({ cacheDir: tempDir('polar-history-cache-') });
      const lease = await history.acquire(join(future.reposDir, instance!.repo), instance!.base_commit);
      attack(lease.tree);
      // copied unchecked, the change is every sample's
      const dir = join(tempDir('polar-history-unchecked-'), 'repo');
      const copied = await execTree('bash', ['-c', COPY_SCRIPT, 'x', lease.tree, dir], {
        env: gitEnv(gitconfig),
      });
      assert.equal(copied.exitCode, 0, copied.output);
      const seen = await execTree('bash', ['-c', 'grep -rl FUTURE-FIX . || true'], { cwd: dir });
      assert.notEqual(seen.stdout.trim(), '', 'the unchecked copy carries it');
      const env = await new LocalRuntime({ reposDir: future.reposDir, history }).prepare(instance!, 'agent');
      try {
        const clean = await env.exec('grep -rl FUTURE-FIX . || true; git status --porcelain --ignored');
        assert.equal(clean.output.trim(), '', clean.output);
      } finally {
        await env.dispose();
      }
    });
  }
});
