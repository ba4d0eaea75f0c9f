/**
 * The environment's wheelhouse (`<environment>/wheelhouse`): the build requirements of the trees its
 * samples install (build-requirements.ts), fetched as wheels with the environment's own pip and the
 * user's pip configuration, once per requirement set, under a lock. `polar-wheelhouse.json` in it lists
 * the sets fetched. Every sample's commands get PIP_NO_INDEX=1 and PIP_FIND_LINKS=<wheelhouse>
 * (layer.ts): the per-sample install runs offline, here and in the sandbox alike.
 *
 * The fetch is a build step like the environment's own (`pip wheel` builds a requirement that comes as
 * an sdist: its setup.py is code): it runs in the build sandbox (build-sandbox.ts), the wheelhouse its
 * only writable path, the environment read-only, the network the host's only where pip's sources are
 * remote. The wheelhouse is a folder polar made after the environment's build (build.ts); anything
 * else there (a link the build left) is refused, never bound writable.
 */
import { readFileSync } from 'node:fs';
import { lstat, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { log } from '../../util/log.ts';
import { requirementsKey, type TreeBuildRequirements } from './build-requirements.ts';
import { openBuildSandbox, sandboxLine, writeInside } from './build-sandbox.ts';
import { withLock } from './lock.ts';
import { type CachedEnv, EnvBuildError } from './types.ts';

export const WHEELHOUSE_RECORD = 'polar-wheelhouse.json';

/** The wheelhouse folder of a cached environment. */
export const wheelhouseOf = (envDir: string) => join(envDir, 'wheelhouse');

interface WheelhouseRecord {
  v: 1;
  sets: Record<string, { requirements: string[]; from: string[]; commit: string; fetched_at: string }>;
}

/** The build requirements fetched into the wheelhouse of the environment at `envDir`, every set. */
export function wheelhouseRequirements(envDir: string): string[] {
  try {
    const r = JSON.parse(
      readFileSync(join(wheelhouseOf(envDir), WHEELHOUSE_RECORD), 'utf8'),
    ) as WheelhouseRecord;
    return Object.values(r.sets ?? {}).flatMap((set) => set.requirements);
  } catch {
    return [];
  }
}

async function readRecord(dir: string): Promise<WheelhouseRecord> {
  try {
    const r = JSON.parse(await readFile(join(dir, WHEELHOUSE_RECORD), 'utf8')) as WheelhouseRecord;
    if (r.v === 1 && r.sets) return r;
  } catch {
    // none yet
  }
  return { v: 1, sets: {} };
}

export interface WheelhouseOptions {
  /** the commit the requirements were read at (for messages and the record) */
  commit: string;
  /** pip's variables (build.ts pipEnv: the user's configuration, PIP_RETRIES=0) */
  env: Record<string, string>;
  /** pip's words for a failed pip run (build.ts pipFailure) */
  failure: (output: string, requested: readonly string[]) => string;
  timeoutMs?: number;
  /** the bwrap program (tests: one that is not there, for the unsandboxed path) */
  bwrap?: string;
}

/** Fetches `reqs` into the environment's wheelhouse unless an earlier sample did. */
export async function ensureWheelhouse(
  cached: CachedEnv,
  reqs: TreeBuildRequirements,
  options: WheelhouseOptions,
): Promise<void> {
  const dir = wheelhouseOf(cached.dir);
  if (reqs.requirements.length === 0) return;
  const key = requirementsKey(reqs.requirements);
  if ((await readRecord(dir)).sets[key]) return;
  await withLock(`${cached.dir}.wheels.lock`, async () => {
    const record = await readRecord(dir);
    if (record.sets[key]) return;
    const made = await lstat(dir).catch(() => null);
    if (!made?.isDirectory())
      throw new EnvBuildError(
        `environment ${cached.name}: ${dir} is not the wheelhouse polar made (${made ? 'not a folder' : 'missing'})`,
        '',
        `remove the environment (${cached.dir}); the next run builds it again`,
      );
    const argv = [
      join(cached.dir, 'bin', 'python'),
      '-m',
      'pip',
      'wheel',
      '--wheel-dir',
      dir,
      ...reqs.requirements,
    ];
    log.info(
      `environment ${cached.name}: fetching the build requirements ${reqs.requirements.join(' ')} into its wheelhouse`,
    );
    const sandbox = await openBuildSandbox(
      dir,
      cached.python,
      options.env,
      options.bwrap ? { bwrap: options.bwrap } : {},
    );
    const r = await sandbox
      .run(argv, {
        network: 'pip',
        readOnly: [cached.dir],
        timeoutMs: options.timeoutMs ?? 30 * 60_000,
      })
      .finally(() => sandbox.close());
    const transcript = `# ${sandboxLine(sandbox)}\n$ ${argv.join(' ')}\n${r.output}\n`;
    if (r.exitCode !== 0) {
      await writeFile(`${cached.dir}.wheels.failed.log`, transcript);
      throw new EnvBuildError(
        `environment ${cached.name}: the build requirements of ${options.commit.slice(0, 12)} (${reqs.requirements.join(', ')}; from ${reqs.from.join(', ')}) cannot be fetched: ${r.timedOut ? 'timed out' : options.failure(r.output, reqs.requirements)}`,
        transcript,
        `the install step needs them and runs offline; they come from your pip configuration, as the environment's packages do (whole log: ${cached.dir}.wheels.failed.log)`,
      );
    }
    record.sets[key] = {
      requirements: reqs.requirements,
      from: reqs.from,
      commit: options.commit,
      fetched_at: new Date().toISOString(),
    };
    // (written new: the fetch could have left anything at that name)
    await writeInside(dir, join(dir, WHEELHOUSE_RECORD), `${JSON.stringify(record, null, 2)}\n`);
  });
}
