/**
 * Environments built once per recipe and kept in polar's cache: `<cache>/<owner>__<name>-<version>-<key>`,
 * a venv of the spec's Python with the spec's packages, then its pip_packages, pip-installed in that
 * order (SWE-bench v4.1.0 test_spec/python.py make_env_script_list_py: `conda create python=X
 * {packages}`, or `pip install -r requirements.txt`, then `pip install {pip_packages}`), plus the import
 * guard's hook. The key is a hash of everything that decides the contents (the interpreter and its
 * version, the requirement lines, the pip packages, the hook, polar's builder version), so a changed
 * spec builds a new environment and an unchanged one is reused by every sample and run. `polar-env.json`
 * is written last: a folder without it is a build that did not finish, and is built again.
 *
 * pip runs with the user's own configuration (an index, a mirror, find-links: nothing is overridden)
 * and PIP_RETRIES=0 unless the user set PIP_RETRIES, so an unreachable index fails at once. A build is
 * made under a lock (`<folder>.lock`, holding the builder's pid), so two runs never build one
 * environment at once; a failed build leaves no folder and its log at `<folder>.failed.log`.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { log } from '../../util/log.ts';
import { plural } from '../../util/plural.ts';
import { insideDir } from '../../util/safe-path.ts';
import type { SweInstance } from '../dataset.ts';
import { commitBuildRequirements } from './build-requirements.ts';
import { openBuildSandbox, sandboxLine, writeInside } from './build-sandbox.ts';
import { GUARD_HOOK, GUARD_MODULE, GUARD_PTH } from './guard.ts';
import { withLock } from './lock.ts';
import { findPython } from './python.ts';
import { recipeFor } from './recipe.ts';
import { type CachedEnv, EnvBuildError, type EnvRecipe, type PythonInfo } from './types.ts';
import { ensureWheelhouse, wheelhouseOf } from './wheelhouse.ts';

/** bump when what a build does changes (every cached environment is then built again) */
export const BUILDER_VERSION = 3; // 3: an environment holds its wheelhouse (issue 46)
export const MANIFEST = 'polar-env.json';

export interface EnvironmentsOptions {
  /** where environments are kept (DEFAULTS.envCache) */
  cacheDir: string;
  /** DIR/<owner>/<name> repositories (requirement files are read from them) */
  reposDir: string;
  /** --env-python: interpreters by version ("3.9" -> path) */
  pythons?: Record<string, string>;
  /** more variables for pip (tests make it offline: PIP_NO_INDEX, PIP_FIND_LINKS) */
  env?: Record<string, string>;
  /** limit of one pip step */
  stepTimeoutMs?: number;
}

export interface BuildStep {
  name: string;
  argv: string[];
}

/** a requirement, a version list, a dependency line: the shapes pip's messages name them in */
const REQUIREMENT_TEXT = /^[A-Za-z0-9._\-[\],<>=!~*+;'" ()]+$/;
const DEPENDS = /^[A-Za-z0-9._-]+ [A-Za-z0-9.+!_-]+ depends on [A-Za-z0-9._\-[\],<>=!~*+ ]+$/;
const USER_REQUESTED = /^The user requested [A-Za-z0-9._\-[\],<>=!~*+ ]+$/;

/**
 * Why pip failed, in polar's words (issue 43: pip's output is never echoed into a reason, which reaches
 * a gym reply: `-r /root/secret` once made pip print the file's first line back as "No matching
 * distribution found for <line>"). A requirement is named only when it is one polar asked for
 * (`requested`), a conflict only by lines of pip's own shapes; everything else is a cause without
 * pip's text. pip's whole output stays in the build log and the sample's env.log.
 */
export function pipFailure(output: string, requested: readonly string[] = []): string {
  const asked = new Set(requested.map((r) => r.trim()));
  const missing = /No matching distribution found for (\S+)/.exec(output)?.[1];
  if (missing !== undefined) {
    if (!asked.has(missing))
      return 'pip cannot install a dependency of the requirements (the build log names it)';
    const versions = /satisfies the requirement \S+ \(from versions: ([^)]*)\)/.exec(output)?.[1]?.trim();
    const shown = versions && /^[A-Za-z0-9.+!_, -]+$/.test(versions) ? versions : 'none';
    return `pip cannot install ${missing} (versions it can find: ${shown})`;
  }
  const conflict = output.indexOf('The conflict is caused by:');
  if (conflict !== -1) {
    const lines = output
      .slice(conflict)
      .split('\n')
      .slice(1, 4)
      .map((l) => l.trim())
      .filter((l) => (DEPENDS.test(l) || USER_REQUESTED.test(l)) && REQUIREMENT_TEXT.test(l));
    return `pip found conflicting requirements${lines.length ? `: ${lines.join('; ')}` : ''}`;
  }
  const python =
    /^ERROR: Package '([A-Za-z0-9._-]+)' requires a different Python: ([0-9.]+) not in '([0-9A-Za-z.,<>=!~* ]*)'$/m.exec(
      output,
    );
  if (python) return `${python[1]} requires a different Python (${python[2]} is not ${python[3]})`;
  if (/subprocess-exited-with-error|Failed (?:to )?build/.test(output))
    return 'a package failed to build from source (the build log has its words)';
  if (
    /Could not fetch URL|Failed to establish a new connection|Network is unreachable|name resolution/.test(
      output,
    )
  )
    return 'pip could not reach its package index (the build log has its words)';
  return 'pip failed (the build log has its words)';
}

/** The variables pip runs with: the user's, with PIP_RETRIES=0 unless they set it. */
export function pipEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PIP_RETRIES: process.env.PIP_RETRIES ?? '0',
    PIP_DISABLE_PIP_VERSION_CHECK: '1',
    PIP_NO_INPUT: '1',
    ...extra,
  };
}

/**
 * The hash of what builds an environment, and of the (repository, version) it is for: the one key of an
 * environment, computed here only, so `polar env build` and every sample agree on it. Two versions whose
 * specs read alike (sympy 1.1 to 1.12) get an environment each, named by their own version.
 */
export function envKey(recipe: EnvRecipe, python: PythonInfo): string {
  const what = {
    builder: BUILDER_VERSION,
    repo: recipe.repo,
    version: recipe.version,
    hook: GUARD_HOOK,
    python: { executable: python.executable, version: python.version },
    requirements: recipe.requirements,
    pip_packages: recipe.pipPackages,
  };
  return createHash('sha256').update(JSON.stringify(what)).digest('hex');
}

export function envName(recipe: EnvRecipe, key: string): string {
  const safe = (s: string) => s.replace(/[^A-Za-z0-9._-]+/g, '_');
  return `${safe(recipe.repo.replace('/', '__'))}-${safe(recipe.version || 'none')}-${key.slice(0, 12)}`;
}

/** The pip steps of a recipe after the venv (`-r` a requirements file written into the environment). */
export function buildSteps(recipe: EnvRecipe, dir: string): BuildStep[] {
  const pip = [join(dir, 'bin', 'python'), '-m', 'pip', 'install'];
  const steps: BuildStep[] = [];
  if (recipe.requirements.length > 0)
    steps.push({ name: 'packages', argv: [...pip, '-r', join(dir, 'polar-requirements.txt')] });
  if (recipe.pipPackages.length > 0)
    steps.push({ name: 'pip_packages', argv: [...pip, ...recipe.pipPackages] });
  return steps;
}

export class Environments {
  private readonly building = new Map<string, Promise<CachedEnv>>();
  private readonly recipes = new Map<string, Promise<EnvRecipe | null>>();
  /** the build requirements fetched per (environment, tree) in this process */
  private readonly wheels = new Map<string, Promise<void>>();

  constructor(readonly options: EnvironmentsOptions) {}

  repoDir(repo: string): string {
    return insideDir(this.options.reposDir, ...repo.split('/'));
  }

  /** The recipe of an instance's environment (read once per repository, version and commit). */
  recipe(instance: SweInstance): Promise<EnvRecipe | null> {
    const commit = instance.environment_setup_commit ?? instance.base_commit;
    const key = JSON.stringify([
      instance.repo,
      instance.version,
      commit,
      instance.python,
      instance.pip_packages,
      instance.pre_install,
      instance.install,
    ]);
    let promise = this.recipes.get(key);
    if (!promise) {
      promise = recipeFor(instance, this.repoDir(instance.repo));
      this.recipes.set(key, promise);
      promise.catch(() => {});
    }
    return promise;
  }

  /**
   * The instance's environment, built if it is not in the cache, with the build requirements of the
   * instance's tree in its wheelhouse (wheelhouse.ts); null when the instance gets none.
   */
  async forInstance(instance: SweInstance): Promise<CachedEnv | null> {
    const recipe = await this.recipe(instance);
    if (!recipe) return null;
    const cached = await this.ensure(recipe);
    const key = `${cached.key}\0${instance.repo}\0${instance.base_commit}`;
    let wheels = this.wheels.get(key);
    if (!wheels) {
      wheels = (async () => {
        const reqs = await commitBuildRequirements(this.repoDir(instance.repo), instance.base_commit);
        await ensureWheelhouse(cached, reqs, {
          commit: instance.base_commit,
          env: pipEnv(this.options.env),
          failure: pipFailure,
          ...(this.options.stepTimeoutMs ? { timeoutMs: this.options.stepTimeoutMs } : {}),
        });
      })();
      this.wheels.set(key, wheels);
      wheels.catch(() => {});
    }
    await wheels;
    return cached;
  }

  /**
   * An environment for a recipe: from the cache, or built (once per process, under a lock across them).
   * Its `recipe` is the caller's: the per-sample steps (pre_install, install) are not part of the key.
   */
  async ensure(recipe: EnvRecipe): Promise<CachedEnv> {
    const python = await findPython(
      { spec: recipe.python, for: `the spec of ${recipe.repo} ${recipe.version}` },
      this.options.pythons,
    );
    const key = envKey(recipe, python);
    let promise = this.building.get(key);
    if (!promise) {
      promise = this.cachedOrBuilt(recipe, python, key);
      this.building.set(key, promise);
      // a failure is kept for this run (every sample of the environment gets it, none builds it again);
      // nothing of it is on disk, so the next run (--resume) builds it afresh
      promise.catch(() => {});
    }
    return { ...(await promise), recipe };
  }

  private async cachedOrBuilt(recipe: EnvRecipe, python: PythonInfo, key: string): Promise<CachedEnv> {
    const name = envName(recipe, key);
    const dir = join(this.options.cacheDir, name);
    await mkdir(this.options.cacheDir, { recursive: true });
    const cached = await readManifest(dir, key);
    if (cached) return { ...cached, recipe, built: false };
    return withLock(`${dir}.lock`, async () => {
      const again = await readManifest(dir, key);
      if (again) return { ...again, recipe, built: false };
      return this.build(recipe, python, key, name, dir);
    });
  }

  private async build(
    recipe: EnvRecipe,
    python: PythonInfo,
    key: string,
    name: string,
    dir: string,
  ): Promise<CachedEnv> {
    const started = performance.now();
    const what = `${recipe.repo} ${recipe.version}`;
    log.info(`environment ${what}: building with Python ${python.version} (${name})`);
    if (recipe.systemSteps.length > 0)
      log.warn(
        `environment ${what}: not run (they change this machine; run them yourself if the tests need them): ${recipe.systemSteps.join(' ; ')}`,
      );
    if (recipe.skipped.length > 0)
      log.warn(
        `environment ${what}: conda packages with no pip counterpart left out: ${recipe.skipped.join(', ')}`,
      );
    await rm(dir, { recursive: true, force: true });
    // every step in the build sandbox: the folder the only writable path (src/rollout/env/build-sandbox.ts)
    const sandbox = await openBuildSandbox(dir, python, pipEnv(this.options.env));
    let transcript = `# ${sandboxLine(sandbox)}\n`;
    const run = async (step: string, argv: string[]) => {
      log.info(`environment ${what}: ${step}`);
      const r = await sandbox.run(argv, {
        network: step.startsWith('pip') ? 'pip' : 'none',
        timeoutMs: this.options.stepTimeoutMs ?? 60 * 60_000,
      });
      transcript += `$ ${argv.join(' ')}\n${r.output}\n`;
      if (r.exitCode === 0) return r.output;
      const reason = r.timedOut
        ? 'timed out'
        : step.startsWith('pip')
          ? pipFailure(r.output, [...recipe.requirements, ...recipe.pipPackages])
          : (r.spawnError ?? r.output.trim().split('\n').at(-1));
      await rm(dir, { recursive: true, force: true });
      await writeFile(`${dir}.failed.log`, transcript);
      throw new EnvBuildError(
        `environment ${what}: ${step} failed: ${reason}`,
        transcript,
        `the whole log: ${dir}.failed.log; the spec's pins come from its package index (PyPI): where pip can reach them the build works, and polar eval --resume runs the samples again`,
      );
    };
    await run('venv', [python.executable, '-m', 'venv', dir]);
    await writeInside(dir, join(dir, 'polar-requirements.txt'), `${recipe.requirements.join('\n')}\n`);
    for (const step of buildSteps(recipe, dir)) {
      const count = step.name === 'packages' ? recipe.requirements.length : recipe.pipPackages.length;
      await run(
        `pip install ${plural(count, step.name === 'packages' ? 'package' : 'pip package')}`,
        step.argv,
      );
    }
    const sitePackages = (
      await run('site-packages', [
        join(dir, 'bin', 'python'),
        '-c',
        'import sysconfig; print(sysconfig.get_paths()["purelib"])',
      ])
    )
      .trim()
      .split('\n')
      .at(-1)!;
    await sandbox.close();
    // (what the build left in the folder is its own: polar's files are written new, inside it, and the
    // wheelhouse is made new, a folder of polar's: a link the build left there would be bound writable
    // when the build requirements are fetched)
    await rm(wheelhouseOf(dir), { recursive: true, force: true });
    await mkdir(wheelhouseOf(dir));
    await writeInside(dir, join(sitePackages, `${GUARD_MODULE}.py`), GUARD_HOOK);
    await writeInside(dir, join(sitePackages, `${GUARD_MODULE}.pth`), GUARD_PTH);
    // what is installed, from the dist-info folders (as `pip freeze` would list it, without its start-up)
    const installed = (await readdir(sitePackages)).filter((n) => n.endsWith('.dist-info')).sort();
    await writeInside(dir, join(dir, 'polar-build.log'), transcript);
    const manifest = {
      v: 1,
      key,
      name,
      python,
      sitePackages,
      recipe,
      installed: installed.map((n) => n.replace(/\.dist-info$/, '')),
      built_at: new Date().toISOString(),
      build_ms: Math.round(performance.now() - started),
    };
    await writeInside(dir, join(dir, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
    log.info(`environment ${what}: built in ${Math.round((performance.now() - started) / 1000)}s`);
    return { key, name, dir, python, recipe, sitePackages, built: true };
  }
}

/** A finished environment's manifest when its key matches, else null. */
async function readManifest(dir: string, key: string): Promise<Omit<CachedEnv, 'recipe' | 'built'> | null> {
  const path = join(dir, MANIFEST);
  if (!existsSync(path)) return null;
  try {
    const m = JSON.parse(await readFile(path, 'utf8')) as {
      key: string;
      name: string;
      python: PythonInfo;
      sitePackages: string;
    };
    if (m.key !== key || !existsSync(join(dir, 'bin', 'python'))) return null;
    return { key, name: m.name, dir, python: m.python, sitePackages: m.sitePackages };
  } catch {
    return null;
  }
}
