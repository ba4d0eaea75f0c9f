/**
 * No future history: the repository an agent (or the code under test) works in holds nothing that is
 * not an ancestor of base_commit. No other refs, tags, reflog, stash or remote, no objects of later
 * commits, and no alternates into the source repository (`git clone --shared` of `--repos` left one,
 * so `git cat-file -p <the fix commit>` worked from the sample's tree). The leak is real: agents mined
 * future commits in SWE-bench's own images (SWE-bench/SWE-bench issue 465, fixed by PR 471), in
 * SWE-bench Pro (scaleapi/SWE-bench_Pro-os issue 93) and Multi-SWE-bench (issue 70).
 *
 * Local and sandbox runtimes: a bare "history" repository per (source, base_commit) holds exactly the
 * objects reachable from base_commit, fetched once from the source (the one expensive step: a pack of
 * the ancestors), and the source's tags that point at base_commit or its ancestors (setuptools-scm
 * reads a version from them; they reveal nothing later); every environment is a `clone --shared` of
 * it (alternates into that history repo, never into the source), detached at base_commit with no
 * branch, remote or reflog, and only those tags. Containers carry their
 * repository in the image: scrubLines() strips it in place (refs, reflogs, remotes, then a repack that
 * drops every object HEAD does not reach).
 */

import { createHash } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EnvironmentError } from '../../errors.ts';
import { insideDir } from '../../util/safe-path.ts';
import type { SweInstance } from '../dataset.ts';
import { execTree, gitEnv } from '../exec.ts';
import { makeTempDir } from '../temp-dirs.ts';
import { RuntimeError } from './types.ts';

/** Fetching the ancestors of a base commit of a large repository takes minutes (sympy: ~100 s). */
const FETCH_TIMEOUT_MS = 30 * 60_000;

export interface HistoryLease {
  /** the bare history repository (objects: the ancestors of base_commit only) */
  path: string;
  release(): void;
}

interface Entry {
  ready: Promise<string>;
  users: number;
  lastUsed: number;
}

/**
 * The history repositories of this process, made on first use and kept while in use; the least recently
 * used idle ones beyond `keep` are removed (a run over many instances does not keep one per base).
 */
export class HistoryStore {
  private readonly entries = new Map<string, Entry>();
  private rootDir: Promise<string> | undefined;

  constructor(private readonly options: { tmpRoot?: string; keep?: number } = {}) {}

  private root(): Promise<string> {
    this.rootDir ??= makeTempDir(this.options.tmpRoot ?? tmpdir(), 'history').then((dir) => {
      // best effort on the way out: history repositories hold nothing that is not in the source (after
      // a SIGKILL, the reaper removes it: src/rollout/temp-dirs.ts)
      process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
      return dir;
    });
    return this.rootDir;
  }

  /** the history repository of `base` in `source` (a git repository), made if needed */
  async acquire(source: string, base: string): Promise<HistoryLease> {
    const key = `${createHash('sha256').update(source).digest('hex').slice(0, 16)}-${base}`;
    let entry = this.entries.get(key);
    if (!entry) {
      entry = { ready: this.build(source, base, key), users: 0, lastUsed: 0 };
      this.entries.set(key, entry);
      entry.ready.catch(() => this.entries.delete(key));
    }
    entry.users++;
    entry.lastUsed = performance.now();
    const held = entry;
    let path: string;
    try {
      path = await held.ready;
    } catch (error) {
      held.users--;
      throw error;
    }
    let released = false;
    return {
      path,
      release: () => {
        if (released) return;
        released = true;
        held.users--;
        held.lastUsed = performance.now();
        this.evict();
      },
    };
  }

  private evict(): void {
    const keep = this.options.keep ?? 8;
    const idle = [...this.entries]
      .filter(([, e]) => e.users === 0)
      .sort((a, b) => a[1].lastUsed - b[1].lastUsed);
    for (const [key, entry] of idle.slice(0, Math.max(0, idle.length - keep))) {
      this.entries.delete(key);
      void entry.ready.then((path) => rm(path, { recursive: true, force: true })).catch(() => {});
    }
  }

  private async build(source: string, base: string, key: string): Promise<string> {
    const root = await this.root();
    const final = join(root, `${key}.git`);
    const partial = join(root, `${key}.partial-${Math.random().toString(36).slice(2, 8)}`);
    await mkdir(partial);
    const gitconfig = join(root, 'gitconfig');
    if (!existsSync(gitconfig)) await writeFile(gitconfig, '[safe]\n\tdirectory = *\n');
    // the source must allow a want of a bare sha (config passed to its upload-pack through the
    // environment); --no-tags: tags point after base too. Then the tags of base's ancestors (and of
    // base), which reveal nothing later: setuptools-scm reads a version from them (pytest, astropy,
    // matplotlib, xarray), as the official images keep the tags older than base_commit
    const script = [
      'set -e',
      'git init -q --bare "$1"',
      'git -C "$1" -c uploadpack.allowAnySHA1InWant=true fetch -q --no-tags --no-write-fetch-head "$2" "$3:refs/polar/base"',
      `git -C "$2" for-each-ref --merged "$3" --format='+%(refname):%(refname)' refs/tags > "$1/polar-tags"`,
      'if [ -s "$1/polar-tags" ]; then git -C "$1" fetch -q --no-tags --no-write-fetch-head --stdin "$2" < "$1/polar-tags"; fi',
      'rm -f "$1/polar-tags"',
    ].join('\n');
    const r = await execTree('bash', ['-c', script, 'history', partial, source, base], {
      env: gitEnv(gitconfig),
      timeoutMs: FETCH_TIMEOUT_MS,
    });
    if (r.exitCode !== 0) {
      await rm(partial, { recursive: true, force: true });
      throw new RuntimeError(
        `cannot take the history of ${base} from ${source}: ${r.output.trim().split('\n').pop() ?? ''}`,
        'check that the repository holds base_commit (git -C REPO cat-file -t BASE)',
      );
    }
    await rename(partial, final);
    return final;
  }
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
      'pass --repos DIR with DIR/<owner>/<name> git repositories (for the fixtures: node --import tsx scripts/swe-fixtures.ts)',
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
