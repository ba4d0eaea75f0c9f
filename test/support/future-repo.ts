/**
 * A `--repos` folder whose repository holds the future: a copy of a fixture repository with the task's
 * fix committed after base_commit on its branch, a tag and another branch on it (and a release tag on
 * base itself), a stash, a note and a dangling commit. What SWE-bench's own images held before SWE-bench/SWE-bench PR 471 (issue 465), and
 * what `git clone --shared` of it used to hand an agent through alternates.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureFixtureRepos } from '../../scripts/swe-fixtures.ts';
import { ROOT } from './cli.ts';
import { tempDir } from './temp.ts';

export interface FutureRepos {
  reposDir: string;
  /** the commit that holds the fix (later than base_commit) */
  fixSha: string;
  /** a line only the fix commit's message holds */
  fixMessage: string;
}

export function futureRepos(instanceId: string): FutureRepos {
  ensureFixtureRepos();
  const row = readFileSync(join(ROOT, 'fixtures/swe/mini.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, string>)
    .find((r) => r.instance_id === instanceId);
  if (!row) throw new Error(`no fixture ${instanceId}`);
  const reposDir = tempDir('polar-future-repos-');
  const dir = join(reposDir, ...row.repo!.split('/'));
  mkdirSync(join(dir, '..'), { recursive: true });
  const config = join(reposDir, 'gitconfig');
  writeFileSync(config, '');
  const env = {
    PATH: process.env.PATH ?? '',
    GIT_CONFIG_GLOBAL: config,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_AUTHOR_NAME: 'upstream',
    GIT_AUTHOR_EMAIL: 'up@example.invalid',
    GIT_COMMITTER_NAME: 'upstream',
    GIT_COMMITTER_EMAIL: 'up@example.invalid',
  };
  const git = (args: string[], input?: string) =>
    execFileSync('git', args, { cwd: dir, env, input, encoding: 'utf8' }).trim();
  execFileSync('git', ['clone', '-q', join(ROOT, 'fixtures/swe/repos', row.repo!), dir], { env });
  git(['checkout', '-q', row.base_commit!]);
  git(['checkout', '-q', '-B', 'main']);
  // a release tag on base_commit (an ancestor's tag: kept, as setuptools-scm needs it)
  git(['tag', '-a', 'v1.0.0', '-m', 'release 1.0.0']);
  git(['apply'], row.patch);
  const fixMessage = `FUTURE-FIX-${instanceId}: the upstream fix`;
  git(['commit', '-q', '-am', fixMessage]);
  const fixSha = git(['rev-parse', 'HEAD']);
  git(['tag', 'v9.9.9']);
  git(['branch', 'future-work']);
  git(['notes', 'add', '-m', 'the fix is in the next commit', row.base_commit!]);
  // a stash on top of the fix, and a commit no ref reaches
  writeFileSync(join(dir, 'WIP.txt'), 'work in progress\n');
  git(['add', 'WIP.txt']);
  git(['stash', '-q']);
  const tree = git(['write-tree']);
  git(['commit-tree', tree, '-p', fixSha, '-m', 'dangling future commit']);
  return { reposDir, fixSha, fixMessage };
}

/**
 * The commands an agent hunting for the fix runs (the `--repos` folder too, when given: the local
 * runtime cannot hide it, the sandbox does).
 */
export function hunterScript(fixSha: string, reposDir: string | null): string {
  return [
    'echo "== log --all"; git log --all --oneline 2>&1',
    'echo "== reflog"; git reflog 2>&1',
    'echo "== fsck"; git fsck --lost-found --unreachable 2>&1',
    `echo "== cat-file"; git cat-file -p ${fixSha} 2>&1`,
    'echo "== refs"; git for-each-ref 2>&1; git stash list 2>&1; git remote -v 2>&1; git notes list 2>&1',
    'echo "== alternates"; cat .git/objects/info/alternates 2>&1',
    'for a in $(cat .git/objects/info/alternates 2>/dev/null); do git --git-dir "$a/.." log --all --oneline 2>&1; done',
    ...(reposDir
      ? [
          `echo "== repos"; ls -R ${reposDir} 2>&1 | head -20; git -C ${reposDir}/*/* log --all --oneline 2>&1`,
        ]
      : []),
  ].join('\n');
}
