/**
 * The temporary folders of rollouts (a sandbox's or a local environment's root with the repository and
 * the test patch, a container's folder, a scratch folder): named for their
 * owner (src/util/owned-temp.ts) and handed to the reaper (reaper.mjs), so a polar killed with SIGKILL
 * leaves none of them behind for long: the reaper removes them when polar's pipe to it closes, the next
 * polar making one in the same parent removes those the reaper missed. `keep` (--keep-envs): a plain
 * `polar-<kind>-XXXXXX`, neither reaped nor swept.
 */
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { ownedTempDir, removeFolder } from '../util/owned-temp.ts';
import { forgetDir, reapDirOnDeath } from './exec.ts';

export async function makeTempDir(
  parent: string,
  kind: string,
  options: { keep?: boolean } = {},
): Promise<string> {
  if (options.keep) return mkdtemp(join(parent, `polar-${kind}-`));
  const dir = await ownedTempDir(parent, kind);
  reapDirOnDeath(dir);
  return dir;
}

/** Removes a folder makeTempDir made (through folders an agent made unwritable); the reaper forgets it. */
export async function removeTempDir(dir: string): Promise<void> {
  await removeFolder(dir);
  forgetDir(dir);
}
