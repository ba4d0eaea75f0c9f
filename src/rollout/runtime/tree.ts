/**
 * The pristine tree of (source, base_commit), kept beside its history repository (`<key>.tree/`, made
 * once with CHECKOUT_SCRIPT under the history's lock): every sample's tree is a plain copy of it
 * (COPY_SCRIPT: `cp -r`, in the sandbox as the sandbox's own user), not a checkout. A checkout reads the
 * blobs out of the history's pack (sympy at a 2020 base: 138 MB mapped, 1,828 files undeltified and
 * inflated, 2-3 s of mostly page faults on a loaded 2-core machine, twice a sample); a copy of the 37 MB
 * tree reads files already in the page cache (0.2 s). The copy's .git is the checkout's: HEAD detached at
 * base, the tags of base's ancestors, alternates into the history repository, nothing else.
 *
 * Checked before every copy, as the history is: every file of its .git but the index is as recorded
 * when it was made (HEAD, config, refs, hooks, info, alternates), .git/objects holds nothing of its own,
 * and `git status --ignored` finds the tree as HEAD has it (no file changed, added or left ignored).
 * A tree that fails is removed and made again: a tree changed by an unsandboxed run would otherwise be
 * every later sample's starting point (a planted fix, a changed test, a hook).
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { execTree, gitEnv } from '../exec.ts';
import { RuntimeError } from './types.ts';

export const TREE_RECORD = 'polar-tree.json';

/**
 * Shell lines that copy the pristine tree `$1` into `$2` (an empty or missing directory): modes and
 * times kept, symlinks copied as links, the copier the owner of every file.
 */
export const COPY_SCRIPT = ['set -e', 'mkdir -p "$2"', 'cp -r --preserve=mode,timestamps "$1"/. "$2"/'].join(
  '\n',
);

interface TreeRecord {
  v: 1;
  base: string;
  history: string;
  /** path under .git -> sha256 of its content (every file but the index) */
  git: Record<string, string>;
  made_at: string;
}

async function files(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await files(full)));
    else out.push(full);
  }
  return out;
}

/** sha256 of every file of the tree's .git but the index (which `git status` checks) */
async function gitFiles(tree: string): Promise<Record<string, string>> {
  const git = join(tree, '.git');
  const out: Record<string, string> = {};
  for (const file of (await files(git)).sort()) {
    const name = relative(git, file);
    if (name === 'index') continue;
    out[name] = createHash('sha256')
      .update(await readFile(file))
      .digest('hex');
  }
  return out;
}

/**
 * Why the pristine tree at `tree` may not be copied for `base` (a change since it was made), null when
 * it is as made, 'missing' when there is none.
 */
export async function checkTree(
  tree: string,
  what: { base: string; history: string; gitconfig: string },
): Promise<string | null> {
  let record: TreeRecord;
  try {
    record = JSON.parse(await readFile(`${tree}.json`, 'utf8')) as TreeRecord;
  } catch {
    return 'missing';
  }
  if (record.v !== 1 || record.base !== what.base || record.history !== what.history)
    return `its record is for ${record.base} of ${record.history}`;
  const now = await gitFiles(tree).catch(() => null);
  if (now === null) return 'its .git cannot be read';
  for (const name of new Set([...Object.keys(now), ...Object.keys(record.git)])) {
    if (now[name] === record.git[name]) continue;
    // .git/objects may hold empty folders only (pack/, info/ and alternates, which is recorded)
    return `.git/${name} ${now[name] === undefined ? 'is gone' : record.git[name] === undefined ? 'was added' : 'changed'}`;
  }
  const status = await execTree(
    'git',
    // every stat field compared (the copies' own config compares size and mtime only: here a change that
    // kept both would pass; ctime cannot be set back)
    [
      '-C',
      tree,
      '-c',
      'core.checkStat=default',
      '-c',
      'core.trustctime=true',
      'status',
      '--porcelain',
      '--ignored',
      '--untracked-files=all',
    ],
    { env: gitEnv(what.gitconfig, { GIT_OPTIONAL_LOCKS: '0' }), timeoutMs: 120_000 },
  );
  if (status.exitCode !== 0) return `git status fails: ${status.output.trim().split('\n').pop()}`;
  if (status.stdout.trim() !== '') return `its files changed (${status.stdout.trim().split('\n')[0]})`;
  return null;
}

/** Makes the pristine tree of `base` from the history repository `history` at `tree` (replacing any). */
export async function makeTree(
  tree: string,
  what: { base: string; history: string; gitconfig: string; checkout: string },
): Promise<void> {
  const partial = `${tree}.partial-${Math.random().toString(36).slice(2, 8)}`;
  const r = await execTree('bash', ['-c', what.checkout, 'tree', what.history, partial, what.base], {
    env: gitEnv(what.gitconfig),
    timeoutMs: 30 * 60_000,
  });
  if (r.exitCode !== 0) {
    await rm(partial, { recursive: true, force: true });
    throw new RuntimeError(
      `cannot check out ${what.base} from ${what.history}: ${r.output.trim().split('\n').pop() ?? ''}`,
    );
  }
  // a copy's index stays valid: git compares size and whole-second mtime only (a copy keeps both; inode,
  // ctime and owner differ), so a sample's first `git add -A` does not hash the whole tree again (sympy:
  // 1-2 s on a loaded machine); any write the agent makes moves mtime. Then the index's stat data settled
  // (a file written in the index's own second is "racily clean" and hashed on every status), and the
  // record of everything else in .git
  for (const setting of ['core.checkStat=minimal', 'core.trustctime=false']) {
    const [key, value] = setting.split('=') as [string, string];
    await execTree('git', ['-C', partial, 'config', key, value], {
      env: gitEnv(what.gitconfig),
      timeoutMs: 60_000,
    });
  }
  await new Promise((resolve) => setTimeout(resolve, 1100));
  await execTree('git', ['-C', partial, 'update-index', '-q', '--really-refresh'], {
    env: gitEnv(what.gitconfig),
    timeoutMs: 120_000,
  });
  const record: TreeRecord = {
    v: 1,
    base: what.base,
    history: what.history,
    git: await gitFiles(partial),
    made_at: new Date().toISOString(),
  };
  await rm(tree, { recursive: true, force: true });
  await writeFile(`${tree}.json`, `${JSON.stringify(record, null, 2)}\n`);
  await rename(partial, tree);
}
