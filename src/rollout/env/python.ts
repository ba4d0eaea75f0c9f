/**
 * The interpreter an environment is built with. The spec names a version ("3.9"); polar has no conda, so
 * it looks for that version on this machine: a `--env-python 3.9=PATH` the user gave, `python3.9` on
 * PATH (not a pyenv shim, which runs whatever version is selected), pyenv's `versions/3.9.*`, then
 * /usr/local/bin and /usr/bin. When none is there the build fails with an error that names the version
 * and the places looked; polar never falls back to another version by itself (a user who accepts one
 * says so with --env-python, and the environment records the version that really built it).
 */
import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { execTree } from '../exec.ts';
import { EnvBuildError, type PythonInfo } from './types.ts';

const PROBE = [
  'import os, sys',
  'import venv, ensurepip',
  'print(sys.version.split()[0])',
  'print(sys.base_prefix)',
  'print(os.path.realpath(sys.executable))',
].join('; ');

/** Probes an interpreter: its version and prefix, or why it cannot build an environment. */
export async function probePython(command: string): Promise<PythonInfo | { error: string }> {
  const r = await execTree(command, ['-c', PROBE], { timeoutMs: 30_000 });
  if (r.spawnError) return { error: `${command}: ${r.spawnError}` };
  const lines = r.output.trim().split('\n');
  if (r.exitCode !== 0 || lines.length < 3) {
    const why = r.output.includes('ensurepip')
      ? 'no ensurepip module (on Debian: apt-get install python3-venv, or python3.X-venv)'
      : r.output.trim().split('\n').pop();
    return { error: `${command}: ${why}` };
  }
  const [version, prefix, executable] = lines.slice(-3) as [string, string, string];
  return { version, prefix, executable };
}

const versionOf = (name: string) => /^(\d+)\.(\d+)(?:\.(\d+))?/.exec(name);

/** Where Python X.Y is looked for, in order (existing files only). */
export function pythonCandidates(minor: string, env: NodeJS.ProcessEnv = process.env): string[] {
  const exe = `python${minor}`;
  const out: string[] = [];
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir && !/[\\/]shims$/.test(dir)) out.push(join(dir, exe));
  }
  const pyenv = env.PYENV_ROOT ?? join(homedir(), '.pyenv');
  const versions = join(pyenv, 'versions');
  if (existsSync(versions)) {
    const matching = readdirSync(versions)
      .filter((v) => v === minor || v.startsWith(`${minor}.`))
      .sort((a, b) => Number(versionOf(b)?.[3] ?? 0) - Number(versionOf(a)?.[3] ?? 0));
    for (const v of matching) out.push(join(versions, v, 'bin', exe));
  }
  out.push(join('/usr/local/bin', exe), join('/usr/bin', exe));
  return [...new Set(out)].filter((p) => existsSync(p));
}

export interface PythonRequest {
  /** "3.9", an interpreter path, or null for python3 on PATH */
  spec: string | null;
  /** what asks for it, for messages ("the spec of pytest-dev/pytest 5.4") */
  for: string;
}

const found = new Map<string, Promise<PythonInfo>>();

/** The interpreter for a request (--env-python first); an EnvBuildError names what is missing. */
export function findPython(
  request: PythonRequest,
  overrides: Record<string, string> = {},
): Promise<PythonInfo> {
  const key = `${request.spec}\0${overrides[request.spec ?? ''] ?? ''}`;
  let promise = found.get(key);
  if (!promise) {
    promise = locate(request, overrides);
    found.set(key, promise);
    promise.catch(() => found.delete(key));
  }
  return promise;
}

async function locate(request: PythonRequest, overrides: Record<string, string>): Promise<PythonInfo> {
  const given = request.spec === null ? undefined : overrides[request.spec];
  if (given || request.spec === null || request.spec.includes('/')) {
    const command = given ?? request.spec ?? 'python3';
    const info = await probePython(command);
    if ('error' in info)
      throw new EnvBuildError(
        `Python for ${request.for} cannot build an environment: ${info.error}`,
        info.error,
        given ? `check --env-python ${request.spec}=${given}` : undefined,
      );
    return info;
  }
  const minor = request.spec;
  const tried: string[] = [];
  for (const candidate of pythonCandidates(minor)) {
    const info = await probePython(candidate);
    if (!('error' in info) && (info.version === minor || info.version.startsWith(`${minor}.`))) return info;
    tried.push('error' in info ? info.error : `${candidate}: is Python ${info.version}`);
  }
  throw new EnvBuildError(
    `Python ${minor} (${request.for}) is not on this machine`,
    [
      `looked for python${minor} on PATH (pyenv shims skipped), in $PYENV_ROOT/versions/${minor}.*, /usr/local/bin and /usr/bin`,
      ...tried,
    ].join('\n'),
    `install it (pyenv install ${minor}, or your distribution's python${minor} with its venv module), or name an interpreter with --env-python ${minor}=/path/to/python (another version is then used as given, and recorded)`,
  );
}
