/**
 * A scratch environment: an empty working folder on this machine, for a harness run that names no
 * instance (polar gym's /v1/responses without metadata.instance_id). No isolation: trusted harnesses only.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { execTree } from '../exec.ts';
import { makeTempDir, removeTempDir } from '../temp-dirs.ts';
import { hostLaunch, type InstanceEnv } from './types.ts';

export async function scratchEnv(kind = 'gym'): Promise<InstanceEnv> {
  const root = await makeTempDir(tmpdir(), kind);
  const workdir = join(root, 'work');
  await mkdir(workdir);
  return {
    workdir,
    scratch: root,
    exec: (script, o = {}) =>
      execTree('bash', ['-c', script], { cwd: workdir, env: o.env, timeoutMs: o.timeoutMs, input: o.input }),
    async writeFile(path, content) {
      await writeFile(resolve(workdir, path), content);
    },
    launchHarness: async (request) => hostLaunch(request, workdir),
    dispose: () => removeTempDir(root),
  };
}
