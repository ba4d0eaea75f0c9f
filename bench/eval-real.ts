/**
 * polar eval's overhead by phase on a real large repository (issue 46: sympy-20590, gold, sandbox). It
 * looks for a `--repos` folder holding the repository (POLAR_BENCH_EVAL_REPOS: DIR/<owner>/<name>, a git
 * repository, e.g. one `fetch` brought) and a dataset holding the row (POLAR_BENCH_EVAL_DATASET: .jsonl,
 * .json or .parquet in the SWE-bench schema, e.g. SWE-bench Verified, or a row with its own `python`,
 * `pip_packages`, `install` where your pip cannot have the official pins); it skips, saying so, when either
 * is absent. POLAR_BENCH_EVAL_INSTANCE (default sympy__sympy-20590), POLAR_BENCH_EVAL_RUNS (default 3),
 * POLAR_BENCH_EVAL_RUNTIME (sandbox, the default, or local). pip runs with your own configuration.
 *
 * Everything lives in a fresh temporary cache (environments, history repositories), so the first run is
 * cold: the environment built, the build requirements fetched, the history fetched, the environment
 * validated. Then, alternated, warm runs (every cache kept) against runs whose history cache is new each
 * time (what polar did before issue 46: a history fetched again in every run). Each run is one sample at
 * concurrency 1 through runEval; the runtime is wrapped to time every prepare and dispose by purpose.
 * Overhead = total - agent - tests (results.jsonl's definition); its phases: the agent's environment
 * (prepare, dispose), grading's (prepare, apply, install, parse, dispose), and the rest (patch
 * extraction, the guard, the validation check, writing the run's files). Goal (warm): overhead <= 3 s and
 * <= half the test time.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GoldAgent } from '../src/rollout/agents.ts';
import { loadDataset } from '../src/rollout/dataset.ts';
import { Environments } from '../src/rollout/env/build.ts';
import { runEval } from '../src/rollout/run/run.ts';
import { HistoryStore } from '../src/rollout/runtime/history.ts';
import { LocalRuntime } from '../src/rollout/runtime/local.ts';
import { SandboxRuntime } from '../src/rollout/runtime/sandbox.ts';
import type { InstanceEnv, Runtime } from '../src/rollout/runtime/types.ts';

type Phases = Record<string, number>;

/** the runtime, with every prepare and dispose timed into `phases` (by purpose) */
function timed(runtime: Runtime, phases: Phases): Runtime {
  const add = (k: string, ms: number) => {
    phases[k] = (phases[k] ?? 0) + ms;
  };
  return {
    kind: runtime.kind,
    isolated: runtime.isolated,
    ...(runtime.placement ? { placement: runtime.placement } : {}),
    ...(runtime.environments ? { environments: runtime.environments } : {}),
    check: (instances) => runtime.check(instances),
    async prepare(instance, purpose) {
      const t = performance.now();
      const env = await runtime.prepare(instance, purpose);
      add(`${purpose}.prepare`, performance.now() - t);
      return new Proxy(env, {
        get(target, prop) {
          if (prop === 'dispose')
            return async () => {
              const d = performance.now();
              await target.dispose();
              add(`${purpose}.dispose`, performance.now() - d);
            };
          const value = Reflect.get(target, prop, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
        set(target, prop, value) {
          return Reflect.set(target, prop, value, target);
        },
      }) as InstanceEnv;
    },
  };
}

const ms = (x: number | undefined) => (x === undefined ? '-' : `${Math.round(x)}`);

export async function benchEvalReal(): Promise<void> {
  const repos = process.env.POLAR_BENCH_EVAL_REPOS;
  const dataset = process.env.POLAR_BENCH_EVAL_DATASET;
  const id = process.env.POLAR_BENCH_EVAL_INSTANCE ?? 'sympy__sympy-20590';
  if (!repos || !dataset || !existsSync(repos) || !existsSync(dataset)) {
    console.log(
      `eval on a real repository: skipped (set POLAR_BENCH_EVAL_REPOS to a --repos folder holding the repository, e.g. DIR/sympy/sympy, and POLAR_BENCH_EVAL_DATASET to a dataset holding ${id}; given: ${repos ?? 'none'}, ${dataset ?? 'none'})`,
    );
    return;
  }
  const instance = (await loadDataset(dataset)).find((i) => i.instance_id === id);
  if (!instance) {
    console.log(`eval on a real repository: skipped (${dataset} holds no ${id})`);
    return;
  }
  const runs = Number(process.env.POLAR_BENCH_EVAL_RUNS ?? 3);
  const kind = process.env.POLAR_BENCH_EVAL_RUNTIME === 'local' ? 'local' : 'sandbox';
  const tmp = mkdtempSync(join(tmpdir(), 'polar-bench-eval-real-'));
  const environments = new Environments({ cacheDir: join(tmp, 'envs'), reposDir: repos });
  const cached = new HistoryStore({ cacheDir: join(tmp, 'history') });
  const runtimeWith = (history: HistoryStore): Runtime =>
    kind === 'local'
      ? new LocalRuntime({ reposDir: repos, environments, history })
      : new SandboxRuntime({ reposDir: repos, environments, history });
  const rows: Array<{ mode: string; phases: Phases }> = [];
  const one = async (mode: string, history: HistoryStore) => {
    const phases: Phases = {};
    const runtime = timed(runtimeWith(history), phases);
    await runtime.check([instance]);
    const out = join(tmp, `out-${rows.length}`);
    const { results } = await runEval({
      instances: [instance],
      agent: new GoldAgent(),
      runtime,
      out,
      samples: 1,
      concurrency: 1,
      agentTimeoutMs: 600_000,
      testTimeoutMs: 1_800_000,
      resume: false,
      dataset: 'bench',
      progress: false,
    });
    const r = results[0]!;
    if (r.status !== 'resolved') throw new Error(`${id} ${mode}: ${r.status} (${r.reason})`);
    const d = r.durations_ms as Record<string, number>;
    Object.assign(phases, {
      total: d.total!,
      agent: d.agent!,
      tests: d.tests!,
      overhead: d.overhead!,
      apply: d.apply!,
      install: d.env_install!,
      parse: d.parse!,
    });
    const named = [
      'agent.prepare',
      'agent.dispose',
      'grade.prepare',
      'apply',
      'install',
      'parse',
      'grade.dispose',
    ];
    phases.other = phases.overhead! - named.reduce((a, k) => a + (phases[k] ?? 0), 0);
    rows.push({ mode, phases });
    rmSync(out, { recursive: true, force: true });
  };
  try {
    console.log(
      `eval on a real repository: ${id} at ${instance.base_commit.slice(0, 12)}, gold, ${kind}, concurrency 1`,
    );
    await one('cold', cached);
    for (let i = 0; i < runs; i++) {
      await one('warm', cached);
      await one('history per run', new HistoryStore({ cacheDir: join(tmp, `history-${i}`) }));
    }
    const cols = [
      'total',
      'tests',
      'overhead',
      'agent.prepare',
      'agent.dispose',
      'grade.prepare',
      'apply',
      'install',
      'parse',
      'grade.dispose',
      'other',
    ];
    console.log(['run', 'mode'.padEnd(16), ...cols.map((c) => c.padStart(13))].join(' '));
    for (const [i, r] of rows.entries())
      console.log(
        [String(i).padStart(3), r.mode.padEnd(16), ...cols.map((c) => ms(r.phases[c]).padStart(13))].join(
          ' ',
        ),
      );
    const mean = (mode: string, k: string) => {
      const xs = rows.filter((r) => r.mode === mode).map((r) => r.phases[k] ?? 0);
      return xs.reduce((a, b) => a + b, 0) / xs.length;
    };
    const [overhead, tests, before] = [
      mean('warm', 'overhead'),
      mean('warm', 'tests'),
      mean('history per run', 'overhead'),
    ];
    console.log(
      `warm overhead ${ms(overhead)} ms a sample (${(overhead / tests).toFixed(2)}x the tests' ${ms(tests)} ms; goal <= 3000 ms and <= 0.5x) | with the history fetched every run ${ms(before)} ms (${(before / overhead).toFixed(1)}x) | cold ${ms(rows[0]?.phases.overhead)} ms (environment built, build requirements fetched, history fetched, validated)`,
    );
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
