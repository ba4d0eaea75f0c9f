/**
 * `polar env build`: builds (or finds in the cache) the environment of every selected instance, one per
 * (repository, version) and recipe, with progress, before an evaluation needs them, and fetches the
 * build requirements of each instance's tree into its wheelhouse. With --validate it also shows each
 * environment works, as eval would before scoring a sample from it (src/rollout/validate.ts: the gold
 * patch of one of its instances resolves, or PASS_TO_PASS pass on the base tree), and prints a table
 * per (repository, version): built, validated, time, why not. `polar eval` does the same on demand; this
 * only does it ahead, and says which fail and why.
 */
import { existsSync } from 'node:fs';
import { EXIT, InputError, PolarError, UsageError } from '../errors.ts';
import { loadDataset, type SweInstance, selectInstances } from '../rollout/dataset.ts';
import { ensureDatasetRepos, reposFor } from '../rollout/dataset-repos.ts';
import { Environments } from '../rollout/env/build.ts';
import type { EnvRecipe } from '../rollout/env/types.ts';
import { createRuntime } from '../rollout/runtime/create.ts';
import type { Runtime } from '../rollout/runtime/types.ts';
import { EnvValidation, type EnvVerdict, verdictProblem } from '../rollout/validate.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';

export interface EnvBuildFlags {
  dataset: string;
  split: string;
  instances?: string[];
  limit?: number;
  shard?: { index: number; count: number };
  repos?: string;
  envCache: string;
  envPython?: Record<string, string>;
  /** check each environment as eval would before scoring from it */
  validate?: boolean;
  /** where --validate grades (sandbox or local) */
  runtime: 'sandbox' | 'local';
  /** milliseconds: a validation's test run */
  testTimeout: number;
  json?: boolean;
  quiet?: boolean;
}

export interface EnvBuildLine {
  repo: string;
  version: string;
  instances: string[];
  status: 'built' | 'cached' | 'failed';
  name: string | null;
  dir: string | null;
  python: string | null;
  error: string | null;
  /** what the spec asks of the machine that polar does not run */
  system_steps: string[];
  /** --validate: the verdict kept with the environment (null: not validated, or the build failed) */
  validation: Pick<EnvVerdict, 'valid' | 'mode' | 'instance_id' | 'status' | 'reason' | 'failing'> | null;
  /** seconds: building (or finding) it and validating it */
  seconds: number;
}

interface Group {
  recipe: EnvRecipe | Error;
  instances: SweInstance[];
  repo: string;
  version: string;
}

/** One group per distinct recipe, in dataset order. */
async function groups(environments: Environments, instances: SweInstance[]): Promise<Group[]> {
  const byKey = new Map<string, Group>();
  for (const instance of instances) {
    let recipe: EnvRecipe | Error | null;
    try {
      recipe = await environments.recipe(instance);
    } catch (error) {
      recipe = error as Error;
    }
    if (recipe === null) continue;
    const key =
      recipe instanceof Error ? `${instance.repo}\0${instance.version}\0error` : JSON.stringify(recipe);
    const group = byKey.get(key) ?? { recipe, instances: [], repo: instance.repo, version: instance.version };
    group.instances.push(instance);
    byKey.set(key, group);
  }
  return [...byKey.values()];
}

/** The environment of a group built or found, each instance's build requirements fetched, and validated. */
async function buildGroup(
  group: Group,
  environments: Environments,
  validation: EnvValidation | null,
): Promise<Omit<EnvBuildLine, 'repo' | 'version' | 'instances' | 'seconds'>> {
  if (group.recipe instanceof Error) throw group.recipe;
  const env = await environments.ensure(group.recipe);
  for (const instance of group.instances) await environments.forInstance(instance);
  // the gold patch of the first instance that has one checks it; else the first one's PASS_TO_PASS
  const first = group.instances.find((i) => i.patch.trim() !== '') ?? group.instances[0]!;
  const verdict = validation ? await validation.verdict(first) : null;
  return {
    status: env.built ? 'built' : 'cached',
    name: env.name,
    dir: env.dir,
    python: env.python.version,
    error: verdict ? verdictProblem(verdict) : null,
    system_steps: group.recipe.systemSteps,
    validation: verdict
      ? {
          valid: verdict.valid,
          mode: verdict.mode,
          instance_id: verdict.instance_id,
          status: verdict.status,
          reason: verdict.reason,
          failing: verdict.failing,
        }
      : null,
  };
}

/** The table of --validate: one row per (repository, version). */
export function formatTable(lines: EnvBuildLine[], validated: boolean): string {
  const rows = lines.map((l) => [
    l.repo,
    l.version,
    l.status === 'failed' ? 'no' : l.status,
    !validated ? '-' : l.validation === null ? 'no' : l.validation.valid ? 'yes' : 'NO',
    `${l.seconds.toFixed(0)}s`,
    l.error ?? (validated && l.status !== 'failed' && l.validation === null ? 'not checked' : ''),
  ]);
  const head = ['repository', 'version', 'built', 'validated', 'time', 'why not'];
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(width[i]!)))
      .join('  ')
      .trimEnd();
  return [line(head), ...rows.map(line)].join('\n');
}

async function runtimeFor(f: EnvBuildFlags & { repos: string }): Promise<Runtime> {
  if (f.runtime !== 'sandbox' && f.runtime !== 'local')
    throw new UsageError(
      `--runtime ${f.runtime}: polar env build builds environments for the sandbox and local runtimes`,
      'containers bring their environment in their image',
    );
  return createRuntime(
    {
      kind: f.runtime,
      repos: f.repos,
      environments: { cacheDir: f.envCache, pythons: f.envPython ?? {} },
    },
    { harness: null },
  );
}

export async function envBuildCommand(f: EnvBuildFlags): Promise<number> {
  if (f.quiet) log.configure({ quiet: true });
  const all = await loadDataset(f.dataset, { split: f.split });
  if (all.length === 0) throw new InputError(f.dataset, undefined, undefined, 'holds no instances');
  const instances = selectInstances(all, { instances: f.instances, limit: f.limit, shard: f.shard });
  const repos = reposFor(f.repos, f.dataset);
  ensureDatasetRepos(f.dataset, repos, instances);
  const runtime = f.validate ? await runtimeFor({ ...f, repos }) : null;
  const environments =
    runtime?.environments ??
    new Environments({ cacheDir: f.envCache, reposDir: repos, pythons: f.envPython ?? {} });
  const missing = [...new Set(instances.map((i) => i.repo))].filter(
    (r) => !existsSync(environments.repoDir(r)),
  );
  if (missing.length > 0)
    throw new UsageError(
      `no repository for ${missing.slice(0, 3).join(', ')} under ${repos}`,
      'pass --repos DIR with DIR/<owner>/<name> git repositories (the specs read requirement files from them)',
    );
  const todo = await groups(environments, instances);
  if (runtime) await runtime.check(todo.flatMap((g) => g.instances));
  const validation = runtime
    ? new EnvValidation(runtime, environments, { testTimeoutMs: f.testTimeout })
    : null;
  const none = instances.length - todo.reduce((n, g) => n + g.instances.length, 0);
  log.info(
    `${plural(todo.length, 'environment')} for ${plural(instances.length - none, 'instance')}${none ? ` (${none} need none: no spec, no environment fields)` : ''}; cache ${f.envCache}`,
  );
  const lines: EnvBuildLine[] = [];
  for (const [i, group] of todo.entries()) {
    const base = {
      repo: group.repo,
      version: group.version,
      instances: group.instances.map((x) => x.instance_id),
    };
    log.info(
      `[${i + 1}/${todo.length}] ${group.repo} ${group.version} (${plural(group.instances.length, 'instance')})`,
    );
    const started = performance.now();
    try {
      const done = await buildGroup(group, environments, validation);
      lines.push({ ...base, ...done, seconds: (performance.now() - started) / 1000 });
      log.info(`[${i + 1}/${todo.length}] ${done.status}: ${done.dir}`);
    } catch (error) {
      const message = (error as Error).message;
      lines.push({
        ...base,
        status: 'failed',
        name: null,
        dir: null,
        python: null,
        error: message,
        system_steps: [],
        validation: null,
        seconds: (performance.now() - started) / 1000,
      });
      log.error(message);
      if (PolarError.isInstance(error) && error.hint) log.hint(error.hint);
    }
  }
  const count = (s: EnvBuildLine['status']) => lines.filter((l) => l.status === s).length;
  const invalid = lines.filter((l) => l.validation && !l.validation.valid).length;
  if (f.json) process.stdout.write(`${JSON.stringify(lines, null, 2)}\n`);
  else {
    if (f.validate) process.stdout.write(`${formatTable(lines, true)}\n`);
    process.stdout.write(
      `${plural(lines.length, 'environment')}: ${count('built')} built, ${count('cached')} cached, ${count('failed')} failed${f.validate ? `, ${lines.length - count('failed') - invalid} validated, ${invalid} invalid` : ''}\n`,
    );
  }
  return count('failed') > 0 || invalid > 0 ? EXIT.environment : EXIT.ok;
}
