/**
 * The recipe of an instance's environment: from the official v4.1.0 table (src/rollout/env/official.ts) by
 * repository and version, or from the row's own fields (`python`, `pip_packages`, `pre_install`,
 * `install`), each over the official value when the repository has one. A row with neither gets no
 * environment (its tests run in polar's own environment, as a `test_cmd` row always did).
 *
 * `packages: requirements.txt` and `environment.yml` are read from the repository itself at the row's
 * environment_setup_commit (else base_commit), as SWE-bench's get_requirements_by_commit and
 * get_environment_yml_by_commit (v4.1.0 test_spec/python.py) read them from GitHub: the first path of
 * MAP_REPO_TO_REQS_PATHS that exists, `-r other.txt` lines inlined (before the file's own lines), lines
 * starting with `-e .`, `#` or `.[test` dropped, and `types-pkg_resources` replaced by
 * `types-setuptools` (REPLACE_REQ_PACKAGES).
 */
import { posix } from 'node:path';
import { requirementProblem, withoutComment } from '../../util/requirement.ts';
import type { SweInstance } from '../dataset.ts';
import { execTree } from '../exec.ts';
import { condaListRequirements, environmentYmlRequirements } from './conda.ts';
import { ENV_YML_PATHS, officialEnv, REQUIREMENTS_PATHS } from './official.ts';
import { EnvBuildError, type EnvRecipe } from './types.ts';

/** pre_install steps that change the machine rather than the tree: reported, not run */
const SYSTEM_STEP = /^\s*(sudo\s+)?(apt-get|apt|yum|dnf|apk|locale-gen)\b|\/etc\//;

/** whether a spec's shell step changes this machine (a package install, a locale, a file under /etc) */
export const isSystemStep = (step: string) => SYSTEM_STEP.test(step);

/** The row fields that make a row's own recipe. */
export const ROW_ENV_FIELDS = ['python', 'pip_packages', 'pre_install', 'install'] as const;

export function hasRowEnv(instance: SweInstance): boolean {
  return ROW_ENV_FIELDS.some((f) => instance[f] !== undefined);
}

/** Whether an instance gets a polar-built environment at all (no file is read). */
export function wantsEnvironment(instance: SweInstance): boolean {
  return hasRowEnv(instance) || officialEnv(instance.repo, instance.version) !== null;
}

/** Reads `<commit>:<path>` from the repository, or null when the path is not there. */
async function gitShow(repoDir: string, commit: string, path: string): Promise<string | null> {
  const r = await execTree('git', ['-C', repoDir, 'show', `${commit}:${path}`], { timeoutMs: 60_000 });
  return r.exitCode === 0 ? r.output : null;
}

const dropped = (line: string) => ['-e .', '#', '.[test'].some((p) => line.trim().startsWith(p));
const replaceYanked = (text: string) =>
  text.replace(/^(\s*-?\s*)types-pkg_resources([<>=!~]=?.*)?$/gm, '$1types-setuptools');

/** get_requirements_by_commit: the first file found, with its `-r` files inlined first. */
async function readRequirements(
  repoDir: string,
  commit: string,
  paths: string[],
): Promise<{ lines: string[]; from: string } | null> {
  for (const path of paths) {
    const text = await gitShow(repoDir, commit, path);
    if (text === null) continue;
    const own: string[] = [];
    const included: string[] = [];
    for (const line of text.split('\n')) {
      if (line.trim().startsWith('-r')) {
        const file = posix.normalize(posix.join(posix.dirname(path), line.trim().slice(2).trim()));
        const sub = await gitShow(repoDir, commit, file);
        if (sub !== null) included.push(...sub.split('\n').filter((l) => !dropped(l)));
      } else if (!dropped(line)) own.push(line);
    }
    const lines = replaceYanked([...included, ...own].join('\n'))
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
    return { lines, from: `${commit}:${path}` };
  }
  return null;
}

function missingFile(instance: SweInstance, what: string, paths: string[], commit: string): EnvBuildError {
  return new EnvBuildError(
    `environment ${instance.repo} ${instance.version}: the spec reads ${what} from the repository, but none of ${paths.join(', ')} is at ${commit}`,
    '',
    'give the row its own pip_packages (a row field) instead',
  );
}

/** The spec's `packages` as pip requirements. */
async function packageRequirements(
  instance: SweInstance,
  packages: string | undefined,
  repoDir: string,
): Promise<Pick<EnvRecipe, 'requirements' | 'requirementsFrom' | 'skipped'>> {
  const none = { requirements: [], requirementsFrom: null, skipped: [] };
  if (!packages) return none;
  const commit = instance.environment_setup_commit ?? instance.base_commit;
  if (packages === 'requirements.txt') {
    const paths = REQUIREMENTS_PATHS[instance.repo] ?? ['requirements.txt'];
    const read = await readRequirements(repoDir, commit, paths);
    if (!read) throw missingFile(instance, 'requirements.txt', paths, commit);
    return { requirements: read.lines, requirementsFrom: read.from, skipped: [] };
  }
  if (packages === 'environment.yml') {
    const paths = ENV_YML_PATHS[instance.repo] ?? ['environment.yml'];
    for (const path of paths) {
      const text = await gitShow(repoDir, commit, path);
      if (text === null) continue;
      return { ...environmentYmlRequirements(replaceYanked(text)), requirementsFrom: `${commit}:${path}` };
    }
    throw missingFile(instance, 'environment.yml', paths, commit);
  }
  return { ...condaListRequirements(packages), requirementsFrom: null };
}

/**
 * The recipe of an instance's environment, or null when it gets none. `repoDir` is the repository the
 * spec's requirement files are read from (the local runtime's DIR/<owner>/<name>).
 */
export async function recipeFor(instance: SweInstance, repoDir: string): Promise<EnvRecipe | null> {
  const official = officialEnv(instance.repo, instance.version);
  const row = hasRowEnv(instance);
  if (!official && !row) return null;
  const preInstall = instance.pre_install ?? official?.pre_install ?? [];
  return checkedRequirements({
    repo: instance.repo,
    version: instance.version,
    source: row ? 'row' : 'swebench-v4.1.0',
    python: instance.python ?? official?.python ?? null,
    // a row's own pip_packages replace the spec's packages too: the row says what the environment holds
    ...(row && instance.pip_packages !== undefined
      ? { requirements: [], requirementsFrom: null, skipped: [] }
      : await packageRequirements(instance, official?.packages, repoDir)),
    pipPackages: instance.pip_packages ?? official?.pip_packages ?? [],
    preInstall: preInstall.filter((s) => !isSystemStep(s)),
    systemSteps: preInstall.filter(isSystemStep),
    install: instance.install ?? official?.install ?? null,
  });
}

/**
 * Every requirement pip gets is a requirement (src/util/requirement.ts), wherever it came from: the
 * row, the official spec, or a file of the repository. An EnvBuildError names the list and the entry.
 */
export function checkedRequirements(recipe: EnvRecipe): EnvRecipe {
  const lists: Array<[string, string[]]> = [
    [
      recipe.requirementsFrom
        ? `the requirements read from ${recipe.requirementsFrom}`
        : "the spec's packages",
      recipe.requirements,
    ],
    [recipe.source === 'row' ? "the row's pip_packages" : "the spec's pip_packages", recipe.pipPackages],
  ];
  for (const [where, list] of lists) {
    for (const entry of list) {
      const problem = requirementProblem(entry);
      if (problem)
        throw new EnvBuildError(
          `environment ${recipe.repo} ${recipe.version}: ${where}: entry ${JSON.stringify(entry)} ${problem}`,
          '',
          'pip is given requirements only (name, extras, version, marker): no pip options, URLs or paths',
        );
    }
  }
  return {
    ...recipe,
    requirements: recipe.requirements.map(withoutComment),
    pipPackages: recipe.pipPackages.map(withoutComment),
  };
}
