/**
 * Environments (src/env/): what an environment costs to build cold against finding it in the cache,
 * and what the per-sample layer and install cost against grading a sample that has none. On the
 * minitest fixture (fixtures/swe/envs.jsonl: pip_packages polar-minitest==1.0, `pip install -e .`),
 * pip offline on the fixture wheels.
 *   build cold      Environments.ensure on an empty cache (venv with pip, pip install, the guard's hook)
 *     baseline      bare `python3 -m venv` + `pip install` of the same wheel: the floor of any venv build
 *   build cached    Environments.ensure of the same recipe by a fresh Environments (a new run; the
 *                   interpreter probe, once per process, is not counted)
 *   layer           the per-sample layer alone (a row without an install step)
 *   layer+install   the layer and `pip install -e .` of the sample's tree
 *   grade           gradePatch of the gold patch with the environment, against a fixture sample graded
 *                   without one (polar-fixtures__calcpy-3: python3 -m pytest in polar's own environment)
 * Figures taken on a loaded machine are provisional.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ensureFixtureRepos, ensureFixtureWheels } from '../scripts/swe-fixtures.ts';
import { loadDataset, type SweInstance } from '../src/rollout/dataset.ts';
import { Environments } from '../src/rollout/env/build.ts';
import { recipeFor } from '../src/rollout/env/recipe.ts';
import { execTree } from '../src/rollout/exec.ts';
import { gradePatch } from '../src/rollout/grade.ts';
import { LocalRuntime } from '../src/rollout/runtime/local.ts';

const ROOT = resolve(import.meta.dirname, '..');
const REPOS = join(ROOT, 'fixtures/swe/repos');
const RUNS = 3;

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const fmt = (ms: number) => (ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${ms.toFixed(0)} ms`);

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

async function layerCost(
  instance: SweInstance,
  cacheDir: string,
  pip: Record<string, string>,
): Promise<number[]> {
  const runtime = new LocalRuntime({
    reposDir: REPOS,
    env: pip,
    environments: new Environments({ cacheDir, reposDir: REPOS, env: pip }),
  });
  const out: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const env = await runtime.prepare(instance, 'grade');
    try {
      const r = await env.environment?.install();
      if (!r?.ok) throw new Error(`install failed: ${r?.step}`);
      out.push(r.durationMs);
    } finally {
      await env.dispose();
    }
  }
  return out;
}

export async function benchEnv(): Promise<void> {
  ensureFixtureRepos();
  const wheels = ensureFixtureWheels();
  const pip = { PIP_CONFIG_FILE: '/dev/null', PIP_NO_INDEX: '1', PIP_FIND_LINKS: wheels, PIP_RETRIES: '0' };
  Object.assign(process.env, pip);
  const [instance] = await loadDataset(join(ROOT, 'fixtures/swe/envs.jsonl'));
  if (!instance) throw new Error('fixtures/swe/envs.jsonl is empty');
  const tmp = mkdtempSync(join(tmpdir(), 'polar-bench-env-'));
  try {
    const bare = await timed(async () => {
      const dir = join(tmp, 'bare');
      for (const [file, ...args] of [
        ['python3', '-m', 'venv', dir],
        [join(dir, 'bin/python'), '-m', 'pip', 'install', 'polar-minitest==1.0'],
      ] as string[][]) {
        const r = await execTree(file!, args, { env: pip });
        if (r.exitCode !== 0) throw new Error(r.output);
      }
    });
    const cacheDir = join(tmp, 'cache');
    const recipe = await recipeFor(instance, join(REPOS, instance.repo));
    if (!recipe) throw new Error('no recipe');
    const cold = await timed(() => new Environments({ cacheDir, reposDir: REPOS, env: pip }).ensure(recipe));
    const cached: number[] = [];
    for (let i = 0; i < RUNS; i++)
      cached.push(
        await timed(() => new Environments({ cacheDir, reposDir: REPOS, env: pip }).ensure(recipe)),
      );
    console.log(`baseline: bare venv + pip install ${fmt(bare)}`);
    console.log(
      `env build cold ${fmt(cold)} (${(cold / bare).toFixed(2)}x bare) | cached ${fmt(mean(cached))} (cold/cached ${(cold / mean(cached)).toFixed(0)}x)`,
    );
    const layerOnly = await layerCost(
      { ...instance, install: undefined, pip_packages: instance.pip_packages },
      cacheDir,
      pip,
    );
    const withInstall = await layerCost(instance, cacheDir, pip);
    console.log(
      `per sample: layer ${fmt(mean(layerOnly))} | layer + pip install -e . ${fmt(mean(withInstall))} (mean of ${RUNS})`,
    );
    const gradeMs = async (i: SweInstance, runtime: LocalRuntime) => {
      const runs: Array<{ total: number; install: number }> = [];
      for (let k = 0; k < RUNS; k++) {
        const g = await gradePatch(runtime, i, i.patch, { testTimeoutMs: 120_000 });
        if (g.status !== 'resolved') throw new Error(`${i.instance_id}: ${g.status} ${g.reason}`);
        runs.push({
          total: Object.values(g.durations_ms).reduce((a, b) => a + b, 0),
          install: g.durations_ms.install,
        });
      }
      return { total: mean(runs.map((r) => r.total)), install: mean(runs.map((r) => r.install)) };
    };
    const envRuntime = new LocalRuntime({
      reposDir: REPOS,
      env: pip,
      environments: new Environments({ cacheDir, reposDir: REPOS, env: pip }),
    });
    const plain = (await loadDataset(join(ROOT, 'fixtures/swe/mini.jsonl'))).find(
      (i) => i.instance_id === 'polar-fixtures__calcpy-3',
    );
    const withEnv = await gradeMs(instance, envRuntime);
    const without = plain
      ? await gradeMs(plain, new LocalRuntime({ reposDir: REPOS }))
      : { total: Number.NaN, install: 0 };
    console.log(
      `grade one sample: with an environment ${fmt(withEnv.total)} (install ${fmt(withEnv.install)}, ${((100 * withEnv.install) / withEnv.total).toFixed(0)}%) | a sample without one (calcpy-3, pytest) ${fmt(without.total)}`,
    );
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
