/**
 * `polar env build`: builds (or finds in the cache) the environment of every selected instance, one per
 * distinct recipe, with progress, before an evaluation needs them. `polar eval` builds the same ones on
 * demand; this only does it ahead, and says which fail and why.
 */
import { existsSync } from 'node:fs';
import { EXIT, InputError, PolarError, UsageError } from '../errors.ts';
import { loadDataset, type SweInstance, selectInstances } from '../rollout/dataset.ts';
import { Environments } from '../rollout/env/build.ts';
import type { EnvRecipe } from '../rollout/env/types.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';

export interface EnvBuildFlags {
  dataset: string;
  split: string;
  instances?: string[];
  limit?: number;
  shard?: { index: number; count: number };
  repos: string;
  envCache: string;
  envPython?: Record<string, string>;
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
}

/** One group per distinct recipe, in dataset order. */
async function groups(
  environments: Environments,
  instances: SweInstance[],
): Promise<Array<{ recipe: EnvRecipe | Error; instances: string[]; repo: string; version: string }>> {
  const byKey = new Map<
    string,
    { recipe: EnvRecipe | Error; instances: string[]; repo: string; version: string }
  >();
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
    group.instances.push(instance.instance_id);
    byKey.set(key, group);
  }
  return [...byKey.values()];
}

export async function envBuildCommand(f: EnvBuildFlags): Promise<number> {
  if (f.quiet) log.configure({ quiet: true });
  const all = await loadDataset(f.dataset, { split: f.split });
  if (all.length === 0) throw new InputError(f.dataset, undefined, undefined, 'holds no instances');
  const instances = selectInstances(all, { instances: f.instances, limit: f.limit, shard: f.shard });
  const environments = new Environments({
    cacheDir: f.envCache,
    reposDir: f.repos,
    pythons: f.envPython ?? {},
  });
  const missing = [...new Set(instances.map((i) => i.repo))].filter(
    (r) => !existsSync(environments.repoDir(r)),
  );
  if (missing.length > 0)
    throw new UsageError(
      `no repository for ${missing.slice(0, 3).join(', ')} under ${f.repos}`,
      'pass --repos DIR with DIR/<owner>/<name> git repositories (the specs read requirement files from them)',
    );
  const todo = await groups(environments, instances);
  const none = instances.length - todo.reduce((n, g) => n + g.instances.length, 0);
  log.info(
    `${plural(todo.length, 'environment')} for ${plural(instances.length - none, 'instance')}${none ? ` (${none} need none: no spec, no environment fields)` : ''}; cache ${f.envCache}`,
  );
  const lines: EnvBuildLine[] = [];
  for (const [i, group] of todo.entries()) {
    const base = { repo: group.repo, version: group.version, instances: group.instances };
    log.info(
      `[${i + 1}/${todo.length}] ${group.repo} ${group.version} (${plural(group.instances.length, 'instance')})`,
    );
    try {
      if (group.recipe instanceof Error) throw group.recipe;
      const env = await environments.ensure(group.recipe);
      lines.push({
        ...base,
        status: env.built ? 'built' : 'cached',
        name: env.name,
        dir: env.dir,
        python: env.python.version,
        error: null,
        system_steps: group.recipe.systemSteps,
      });
      log.info(`[${i + 1}/${todo.length}] ${env.built ? 'built' : 'cached'}: ${env.dir}`);
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
      });
      log.error(message);
      if (PolarError.isInstance(error) && error.hint) log.hint(error.hint);
    }
  }
  const count = (s: EnvBuildLine['status']) => lines.filter((l) => l.status === s).length;
  if (f.json) process.stdout.write(`${JSON.stringify(lines, null, 2)}\n`);
  else
    process.stdout.write(
      `${plural(lines.length, 'environment')}: ${count('built')} built, ${count('cached')} cached, ${count('failed')} failed\n`,
    );
  return count('failed') > 0 ? EXIT.environment : EXIT.ok;
}
