/**
 * A local dataset's repositories, where a user expects them (issue 47 item 2). By default the sandbox
 * and local runtimes look for `<owner>/<name>` git repositories in `repos/` beside the dataset file
 * (reposFor: a dataset's relative places resolve against its own folder, not the current directory).
 * A dataset may ship its repositories as source trees, `src/<owner>/<name>/` beside it (polar's fixture
 * benchmark, fixtures/swe/, and the copy in the npm package): on first use polar commits each tree that
 * the run's repositories folder lacks, with a fixed author, committer and date, so the commit is the same
 * on every machine and is the rows' base_commit (ensureDatasetRepos). scripts/swe-fixtures.ts builds the
 * same repositories for the tests and writes the rows from them.
 */
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { EnvironmentError, InputError } from '../errors.ts';
import { log } from '../util/log.ts';
import { insideDir, isRepoName } from '../util/safe-path.ts';

/** the folder beside a dataset file that holds its repositories by default */
export const DATASET_REPOS = 'repos';
/** the folder beside a dataset file that holds its repositories' source trees, `<owner>/<name>/` */
export const DATASET_SOURCES = 'src';
/** what --help says of the default */
export const REPOS_DEFAULT_SHOWN = `${DATASET_REPOS}/ beside the dataset file`;

const DATE = '2025-01-01T00:00:00Z';

/**
 * The folder of a local dataset file, where its relative paths point (its `repos/` and `src/`, and a row's
 * own `grader` command runs there), or undefined (a hub id, a label).
 */
export function datasetFolder(dataset: string): string | undefined {
  try {
    return statSync(dataset).isFile() ? dirname(resolve(dataset)) : undefined;
  } catch {
    return undefined;
  }
}

/** --repos when given, else `repos/` beside a local dataset file, else `repos` (a hub dataset). */
export function reposFor(given: string | undefined, dataset: string | undefined): string {
  if (given !== undefined) return given;
  if (dataset !== undefined && existsSync(dataset)) return join(dirname(dataset), DATASET_REPOS);
  return DATASET_REPOS;
}

/** The files of a source tree (no caches, no node_modules), sorted; a symbolic link is refused. */
function walk(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    if (name === '__pycache__' || name.endsWith('.pyc') || name === 'node_modules') continue;
    const full = join(dir, name);
    const st = lstatSync(full);
    if (st.isSymbolicLink())
      throw new InputError(full, undefined, undefined, 'a symbolic link in a repository source tree');
    if (st.isDirectory()) out.push(...walk(full));
    else out.push(full);
  }
  return out;
}

/** git with no user or system configuration, the fixed identity and date, in `cwd`. */
function git(cwd: string, config: string, args: string[]): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH,
      HOME: cwd,
      GIT_CONFIG_GLOBAL: config,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_AUTHOR_NAME: 'polar fixtures',
      GIT_AUTHOR_EMAIL: 'fixtures@polar.invalid',
      GIT_COMMITTER_NAME: 'polar fixtures',
      GIT_COMMITTER_EMAIL: 'fixtures@polar.invalid',
      GIT_AUTHOR_DATE: DATE,
      GIT_COMMITTER_DATE: DATE,
      TZ: 'UTC',
    },
  });
}

/** HEAD of a repository, or null when it is not one. */
function headOf(dir: string, config: string): string | null {
  try {
    return git(dir, config, ['rev-parse', 'HEAD']).trim();
  } catch {
    return null;
  }
}

/**
 * Commits the source tree `source` (files with fixed 0644 modes) as one commit into a git repository at
 * `target`; returns its HEAD. A repository already there at the same commit is kept; another one is
 * replaced only with `replace` (the test fixtures), else kept. The new repository is made beside `target`
 * and renamed into place, so two processes at once never see half of one.
 */
export function commitTree(source: string, target: string, o: { replace?: boolean } = {}): string {
  mkdirSync(dirname(target), { recursive: true });
  const work = mkdtempSync(join(dirname(target), `.${target.split('/').pop()}-making-`));
  const config = join(work, 'gitconfig');
  const repo = join(work, 'repo');
  try {
    // an empty global config polar owns (never /dev/null: `git config --global` would replace it)
    writeFileSync(config, '');
    mkdirSync(repo);
    git(repo, config, ['init', '-q', '-b', 'main']);
    for (const file of walk(source)) {
      const to = join(repo, relative(source, file));
      mkdirSync(dirname(to), { recursive: true });
      writeFileSync(to, readFileSync(file), { mode: 0o644 });
    }
    git(repo, config, ['add', '-A']);
    git(repo, config, ['commit', '-q', '--no-gpg-sign', '-m', `${basenameOf(source)}: base`]);
    const head = git(repo, config, ['rev-parse', 'HEAD']).trim();
    if (existsSync(target)) {
      if (headOf(target, config) === head || !o.replace) return headOf(target, config) ?? head;
      rmSync(target, { recursive: true, force: true });
    }
    try {
      renameSync(repo, target);
    } catch (error) {
      // another process put one there first: theirs is kept when it is the same commit
      if (!existsSync(target) || headOf(target, config) !== head) throw error;
    }
    return head;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

const basenameOf = (source: string): string => source.split('/').slice(-2).join('/');

/** true when `commit` is a commit of the repository at `dir` */
function hasCommit(dir: string, commit: string): boolean {
  try {
    execFileSync('git', ['cat-file', '-e', `${commit}^{commit}`], { cwd: dir, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Makes, under `reposDir`, each repository the rows name that is not there and whose source tree the
 * dataset ships (`src/<owner>/<name>/` beside `dataset`), and checks that every row's base_commit is in
 * the repository made from its sources. Returns the repositories made. Rows of a hub dataset, or of a
 * repository without sources, are left to the runtime's own check.
 */
export function ensureDatasetRepos(
  dataset: string,
  reposDir: string,
  rows: ReadonlyArray<{ repo: string; base_commit: string; instance_id: string }>,
): string[] {
  if (!existsSync(dataset)) return [];
  const sources = join(dirname(resolve(dataset)), DATASET_SOURCES);
  if (!existsSync(sources)) return [];
  const made: string[] = [];
  const byRepo = new Map<string, typeof rows>();
  for (const row of rows)
    if (isRepoName(row.repo)) byRepo.set(row.repo, [...(byRepo.get(row.repo) ?? []), row]);
  for (const [repo, its] of byRepo) {
    const source = join(sources, ...repo.split('/'));
    if (!existsSync(source)) continue;
    const target = insideDir(reposDir, ...repo.split('/'));
    if (!existsSync(target)) {
      try {
        commitTree(source, target);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'EACCES' || code === 'EROFS' || code === 'EPERM')
          throw new EnvironmentError(
            `cannot make the repository ${repo} in ${reposDir} (${code})`,
            `give --repos a folder you can write: polar makes the repositories there from ${sources}`,
          );
        throw error;
      }
      made.push(repo);
    }
    const stale = its.find((row) => !hasCommit(target, row.base_commit));
    if (stale)
      throw new InputError(
        dataset,
        undefined,
        `${stale.instance_id}: base_commit`,
        `${stale.base_commit} is not in ${target}, made from ${source}`,
        made.includes(repo)
          ? 'the sources changed after the dataset was written: regenerate its rows (in a clone: node --import tsx scripts/swe-fixtures.ts --write)'
          : `remove ${target}: polar makes it again from ${source}`,
      );
  }
  if (made.length > 0)
    log.info(`made ${made.length} repositories of ${dataset} from ${sources} in ${reposDir} (first use)`);
  return made;
}
