/**
 * polar's own view of the agent's tree, so that what the agent does to its repository cannot turn its
 * sample into an infrastructure `error` (reward null, never trained on, run again by --resume): an agent
 * that writes a wrong fix and then runs `chmod 000 .git`, `rm -rf .git` or makes its files unreadable
 * still gets that fix graded (a zero). Before the agent starts, polar copies the tree's git directory
 * (its index, HEAD and refs; the objects are the history repository's, through alternates) to a folder
 * of its own on this host, which no sandbox sees (an owned temp folder, src/rollout/temp-dirs.ts); after
 * the agent's processes are gone, it gives the whole tree back its owner's read and write permission,
 * and takes the patch with that git
 * directory and the tree as its work tree (`git --git-dir=VIEW --work-tree=TREE`), ignoring the tree's
 * own .git. Runtimes whose tree is not a folder of this host (containers) copy the git directory inside
 * the environment, outside the tree, and do the same there: the agent there could still reach the copy.
 */
import { cp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execTree, gitEnv } from '../exec.ts';
import { type PatchResult, patchPathspecs, shellQuote } from '../patch.ts';
import type { InstanceEnv } from '../runtime/types.ts';
import { makeTempDir, removeTempDir } from '../temp-dirs.ts';

export interface TreeView {
  /** the patch of everything the agent changed since `base` (a commit the view's git directory holds) */
  patch(base: string): Promise<PatchResult>;
  dispose(): Promise<void>;
}

const GIT = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'safe.directory=*'];

/** the patch script, given the git directory and work tree as `$1` and `$2` */
function patchScript(base: string): string {
  const specs = patchPathspecs();
  const git = `GIT_NO_REPLACE_OBJECTS=1 git --git-dir="$1" --work-tree="$2" ${GIT.map(shellQuote).join(' ')}`;
  return [
    'set -e',
    // the agent may have taken its own permission away: give every file and folder back to its owner
    'chmod -R u+rwX -- "$2" 2>/dev/null || true',
    `${git} add -A -- ${specs}`,
    `${git} -c core.quotepath=off diff --cached --binary --no-color --no-ext-diff ${shellQuote(base)} -- ${specs}`,
  ].join('\n');
}

/** polar's view of `env`'s tree, taken now (before the agent runs); null where the runtime has no tree. */
export async function takeTreeView(env: InstanceEnv): Promise<TreeView | null> {
  if (env.hostTree) {
    const dir = await makeTempDir(tmpdir(), 'view');
    try {
      const gitDir = join(dir, 'git');
      await cp(join(env.hostTree, '.git'), gitDir, { recursive: true, verbatimSymlinks: true });
      await writeFile(join(dir, 'gitconfig'), '[safe]\n\tdirectory = *\n');
    } catch (error) {
      await removeTempDir(dir);
      throw error;
    }
    const tree = env.hostTree;
    return {
      async patch(base) {
        const r = await execTree('bash', ['-c', patchScript(base), 'polar-view', join(dir, 'git'), tree], {
          env: gitEnv(join(dir, 'gitconfig')),
          timeoutMs: 300_000,
        });
        if (r.exitCode !== 0) return { patch: '', error: `git diff failed: ${r.output.trim().slice(-500)}` };
        return { patch: r.stdout };
      },
      dispose: () => removeTempDir(dir),
    };
  }
  const gitDir = `${env.scratch}/.polar-view-${Math.random().toString(36).slice(2, 10)}`;
  const copied = await env.exec(`cp -a .git ${shellQuote(gitDir)}`, { timeoutMs: 120_000 });
  if (copied.exitCode !== 0) return null;
  return {
    async patch(base) {
      const r = await env.exec(
        `bash -c ${shellQuote(patchScript(base))} polar-view ${shellQuote(gitDir)} "$PWD"`,
        {
          timeoutMs: 300_000,
        },
      );
      if (r.exitCode !== 0) return { patch: '', error: `git diff failed: ${r.output.trim().slice(-500)}` };
      return { patch: r.stdout };
    },
    dispose: async () => {},
  };
}
