/**
 * No future history: the repository an agent (or the code under test) works in holds nothing that is
 * not an ancestor of base_commit. No other refs, tags, reflog, stash or remote, no objects of later
 * commits, and no alternates into the source repository (`git clone --shared` of `--repos` left one,
 * so `git cat-file -p <the fix commit>` worked from the sample's tree). The leak is real: agents mined
 * future commits in SWE-bench's own images (SWE-bench/SWE-bench issue 465, fixed by PR 471), in
 * SWE-bench Pro (scaleapi/SWE-bench_Pro-os issue 93) and Multi-SWE-bench (issue 70).
 *
 * Local and sandbox runtimes: a bare "history" repository per (source, base_commit) holds exactly the
 * objects reachable from base_commit, fetched from the source (the one expensive step: a pack of the
 * ancestors, ~18 s for sympy), and the source's tags that point at base_commit or its ancestors
 * (setuptools-scm reads a version from them; they reveal nothing later). It is kept in polar's cache
 * (DEFAULTS.historyCache: `$POLAR_CACHE_DIR/history`), shared by every run and every concurrent sample
 * of this machine: made once under a lock, and checked before every reuse against the record polar
 * wrote when it made it (history-check.ts: no pack, loose object, ref or alternates polar did not put
 * there); one that fails the check is set aside and made again. Every environment is a `clone --shared`
 * of it (alternates into that history repo, never into the source), detached at base_commit with no
 * branch, remote or reflog, and only those tags. Containers carry their
 * repository in the image: scrubLines() strips it in place (refs, reflogs, remotes, then a repack that
 * drops every object HEAD does not reach).
 */

import { createHash } from 'node:crypto';
import { existsSync, realpathSync } from 'node:fs';
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { EnvironmentError } from '../../errors.ts';
import { DEFAULTS } from '../../options/defaults.ts';
import { log } from '../../util/log.ts';
import { insideDir } from '../../util/safe-path.ts';
import type { SweInstance } from '../dataset.ts';
import { withLock } from '../env/lock.ts';
import { execTree, gitEnv } from '../exec.ts';
import { checkHistory, HISTORY_RECORD, recordHistory } from './history-check.ts';
import { checkTree, makeTree } from './tree.ts';
import { RuntimeError } from './types.ts';

/** Fetching the ancestors of a base commit of a large repository takes minutes (sympy: ~18 s to ~100 s). */
const FETCH_TIMEOUT_MS = 30 * 60_000;

export interface HistoryLease {
  /** the bare history repository (objects: the ancestors of base_commit only) */
  path: string;
  /** the pristine tree of base_commit checked out from it, to copy (tree.ts COPY_SCRIPT) */
  tree: string;
  release(): void;
}

export interface HistoryStoreOptions {
  /** where the history repositories are kept (default DEFAULTS.historyCache) */
  cacheDir?: string;
}

/** `<sha256 of the source's real path, 16 hex>-<base>`: the cache entry of (source, base) */
export function historyKey(source: string, base: string): string {
  let real = resolve(source);
  try {
    real = realpathSync(real);
  } catch {
    // checked when fetched
  }
  return `${createHash('sha256').update(real).digest('hex').slice(0, 16)}-${base}`;
}

/**
 * The history repositories of this machine, in polar's cache: made on first use (once per process for
 * concurrent samples, under a lock across processes) and checked before each reuse.
 */
export class HistoryStore {
  readonly cacheDir: string;
  private readonly building = new Map<string, Promise<void>>();

  constructor(options: HistoryStoreOptions = {}) {
    this.cacheDir = resolve(options.cacheDir ?? DEFAULTS.historyCache.value);
  }

  private get gitconfig(): string {
    return join(this.cacheDir, 'gitconfig');
  }

  /** the history repository of `base` in `source` (a git repository), made if needed */
  async acquire(source: string, base: string): Promise<HistoryLease> {
    const key = historyKey(source, base);
    const path = join(this.cacheDir, `${key}.git`);
    await mkdir(this.cacheDir, { recursive: true });
    if (!existsSync(this.gitconfig)) await writeFile(this.gitconfig, '[safe]\n\tdirectory = *\n');
    for (let attempt = 0; ; attempt++) {
      const why = await checkHistory(path, base, this.gitconfig);
      if (why === null) break;
      if (attempt > 0)
        throw new RuntimeError(
          `the history repository of ${base} (${path}) fails its check right after it was made: ${why}`,
        );
      await this.once(key, () => this.make(source, base, path));
    }
    const tree = join(this.cacheDir, `${key}.tree`);
    const what = { base, history: path, gitconfig: this.gitconfig, checkout: CHECKOUT_SCRIPT };
    for (let attempt = 0; ; attempt++) {
      const why = await checkTree(tree, what);
      if (why === null) return { path, tree, release: () => {} };
      if (attempt > 0)
        throw new RuntimeError(
          `the tree of ${base} (${tree}) fails its check right after it was made: ${why}`,
        );
      await this.once(`${key}.tree`, () =>
        withLock(`${path.slice(0, -'.git'.length)}.lock`, async () => {
          await sweepLeftovers(tree);
          const again = await checkTree(tree, what);
          if (again === null) return;
          if (again !== 'missing')
            log.warn(`the tree of ${base} (${tree}): ${again}; removed and made again`);
          await makeTree(tree, what);
        }),
      );
    }
  }

  /** one `make` per key at a time in this process (concurrent samples wait for the same one) */
  private async once(key: string, make: () => Promise<void>): Promise<void> {
    let building = this.building.get(key);
    if (!building) {
      building = make().finally(() => this.building.delete(key));
      this.building.set(key, building);
    }
    await building;
  }

  /** makes (or remakes) the history repository at `final`, under a lock across processes */
  private make(source: string, base: string, final: string): Promise<void> {
    return withLock(`${final.slice(0, -'.git'.length)}.lock`, async () => {
      await sweepLeftovers(final);
      const why = await checkHistory(final, base, this.gitconfig);
      if (why === null) return;
      if (why !== 'missing' || existsSync(final)) {
        // moved aside at once (no new checkout reads it), then removed
        const aside = `${final}.rejected-${Math.random().toString(36).slice(2, 8)}`;
        log.warn(`history repository ${final}: ${why}; removed and made again`);
        await rename(final, aside).catch(() => {});
        await rm(aside, { recursive: true, force: true });
        await rm(final, { recursive: true, force: true });
      }
      await this.fetch(source, base, final);
    });
  }

  private async fetch(source: string, base: string, final: string): Promise<void> {
    const partial = `${final}.partial-${Math.random().toString(36).slice(2, 8)}`;
    await mkdir(partial);
    // the source must allow a want of a bare sha (config passed to its upload-pack through the
    // environment); --no-tags: tags point after base too; fetch.unpackLimit=1 keeps every fetch a pack
    // (history-check.ts refuses loose objects). Then the tags of base's ancestors (and of base), which
    // reveal nothing later: setuptools-scm reads a version from them (pytest, astropy, matplotlib,
    // xarray), as the official images keep the tags older than base_commit
    const script = [
      'set -e',
      'git init -q --bare "$1"',
      'git -C "$1" -c fetch.unpackLimit=1 -c uploadpack.allowAnySHA1InWant=true fetch -q --no-tags --no-write-fetch-head "$2" "$3:refs/polar/base"',
      `git -C "$2" for-each-ref --merged "$3" --format='+%(refname):%(refname)' refs/tags > "$1/polar-tags"`,
      'if [ -s "$1/polar-tags" ]; then git -C "$1" -c fetch.unpackLimit=1 fetch -q --no-tags --no-write-fetch-head --stdin "$2" < "$1/polar-tags"; fi',
      'rm -f "$1/polar-tags"',
    ].join('\n');
    const r = await execTree('bash', ['-c', script, 'history', partial, source, base], {
      env: gitEnv(this.gitconfig),
      timeoutMs: FETCH_TIMEOUT_MS,
    });
    if (r.exitCode !== 0) {
      await rm(partial, { recursive: true, force: true });
      throw new RuntimeError(
        `cannot take the history of ${base} from ${source}: ${r.output.trim().split('\n').pop() ?? ''}`,
        'check that the repository holds base_commit (git -C REPO cat-file -t BASE)',
      );
    }
    const record = await recordHistory(partial, { source, base, gitconfig: this.gitconfig });
    await writeFile(join(partial, HISTORY_RECORD), `${JSON.stringify(record, null, 2)}\n`);
    await rename(partial, final);
  }
}

/**
 * Removes what a polar killed while it made or set aside `path` left beside it (`<path>.partial-*`,
 * `<path>.rejected-*`); called under the lock of `path`, so none of them is in use.
 */
async function sweepLeftovers(path: string): Promise<void> {
  const stem = `${basename(path)}.`;
  for (const name of await readdir(dirname(path)))
    if (name.startsWith(`${stem}partial-`) || name.startsWith(`${stem}rejected-`))
      await rm(join(dirname(path), name), { recursive: true, force: true });
}

/** DIR/<owner>/<name> of an instance's repository (a row's repo is owner/name; the path is checked anyway) */
export function sourceRepo(reposDir: string, repo: string): string {
  return insideDir(reposDir, ...repo.split('/'));
}

/** Refuses a run whose instances have no repository under `reposDir` (local and sandbox runtimes). */
export function checkSourceRepos(kind: string, reposDir: string, instances: SweInstance[]): void {
  const missing = [...new Set(instances.map((i) => i.repo))].filter(
    (r) => !existsSync(sourceRepo(reposDir, r)),
  );
  if (missing.length > 0) {
    throw new EnvironmentError(
      `${kind} runtime: no repository for ${missing.slice(0, 3).join(', ')} under ${reposDir}`,
      'pass --repos DIR with DIR/<owner>/<name> git repositories (default: repos/ beside the dataset file), or ship each repository as a source tree in src/<owner>/<name>/ beside the dataset: polar commits it there on first use',
    );
  }
}

/** The store every runtime of this process shares (polar loop makes a runtime per evaluation). */
let shared: HistoryStore | undefined;
export function historyStore(): HistoryStore {
  shared ??= new HistoryStore();
  return shared;
}

/**
 * Shell lines that make `$dest` (an empty or missing directory) a checkout of `$base` from the history
 * repository `$history`, with no branch, remote or reflog: positional parameters $1 history, $2 dest,
 * $3 base. The only link left is .git/objects/info/alternates, to the history repository; the only
 * refs, the tags of base's ancestors.
 */
export const CHECKOUT_SCRIPT = [
  'set -e',
  'git clone -q --shared --no-checkout "$1" "$2" 2>/dev/null',
  'cd "$2"',
  'git checkout -q --detach "$3"',
  'git remote remove origin',
  // every ref but the tags (the history repository holds only those of base's ancestors)
  "git for-each-ref --format='delete %(refname)' | { grep -v '^delete refs/tags/' || true; } | git update-ref --stdin",
  'rm -rf .git/logs .git/FETCH_HEAD .git/ORIG_HEAD',
].join('\n');

/**
 * Shell lines that strip a repository already in place (a container image's /testbed) down to HEAD and
 * its ancestors: detached HEAD, every ref, remote, reflog and stash deleted, alternates dropped, then a
 * repack keeping only what HEAD reaches and a prune of loose leftovers. The repack reads the whole
 * history once (seconds for small repositories, a minute for the largest).
 */
export function scrubLines(dir: string): string[] {
  return [
    `cd ${dir}`,
    'git checkout -q --detach HEAD',
    'for r in $(git remote); do git remote remove "$r"; done',
    "git for-each-ref --format='delete %(refname)' | git update-ref --stdin",
    'rm -rf .git/logs .git/FETCH_HEAD .git/ORIG_HEAD .git/objects/info/alternates',
    'git -c repack.writeBitmaps=false repack -a -d -q',
    'git prune --expire=now',
  ];
}
