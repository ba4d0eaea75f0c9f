/**
 * polar eval's overhead by phase on a real large repository (issue 46: sympy-20590, gold, sandbox). It
 * looks for a `--repos` folder holding the repository (POLAR_BENCH_EVAL_REPOS: DIR/<owner>/<name>, a git
 * repository, bare or not, e.g. a clone of the one `fetch` brought) and a dataset holding the row
 * (POLAR_BENCH_EVAL_DATASET: .jsonl, .json or .parquet in the SWE-bench schema, e.g. SWE-bench Verified,
 * or a row with its own `python`, `pip_packages`, `install` where your pip cannot have the official pins).
 * Without a dataset it runs sympy__sympy-20590 from a row it makes from the repository itself
 * (SWE_BENCH_20590: the dataset's instance id, base_commit, version and FAIL_TO_PASS; the patch and test
 * patch are the PR's own diff, read from DIR/sympy/sympy; pins this machine's pip mirror holds). It skips,
 * saying so, when the repository is absent. POLAR_BENCH_EVAL_INSTANCE (default sympy__sympy-20590),
 * POLAR_BENCH_EVAL_RUNS (default 3), POLAR_BENCH_EVAL_RUNTIME (sandbox, the default, or local). pip runs
 * with your own configuration.
 *
 * Everything lives in a fresh temporary cache (environments, history repositories), so the first run is
 * cold: the environment built, the build requirements fetched, the history fetched, the environment
 * validated. Then, alternated, warm runs (every cache kept) against runs whose history cache is new each
 * time (what polar did before issue 46: a history fetched again in every run), and (sandbox) warm runs whose
 * install runs in every sample (SandboxRuntime installMemo false: before the install memo,
 * src/rollout/env/install-memo.ts). Each run is one sample at
 * concurrency 1 through runEval; the runtime is wrapped to time every prepare and dispose by purpose.
 * Overhead = total - agent - tests (results.jsonl's definition); its phases: the agent's environment
 * (prepare, dispose), grading's (prepare, apply, install, parse, dispose), and the rest (patch
 * extraction, the guard, the validation check, writing the run's files). Goal (warm): overhead <= 3 s and
 * <= half the test time.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GoldAgent } from '../src/rollout/agents.ts';
import { loadDataset, parseRow, type SweInstance } from '../src/rollout/dataset.ts';
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

/** the phases of a sample's overhead timed by name (the rest is `other`) */
const PHASES = [
  'agent.prepare',
  'agent.dispose',
  'grade.prepare',
  'apply',
  'install',
  'parse',
  'grade.dispose',
];

const ms = (x: number | undefined) => (x === undefined ? '-' : `${Math.round(x)}`);

/**
 * sympy__sympy-20590 of SWE-bench Verified (princeton-nlp/SWE-bench_Verified: instance id, base_commit,
 * version 1.7, FAIL_TO_PASS ["test_immutable"], PASS_TO_PASS read by the official run as empty here): the
 * fix is PR 20590's head (7c1516fc: `__slots__ = ()` in sympy/core/_print_helpers.py), its test in
 * sympy/core/tests/test_basic.py. Custom pins (the row's own fields): Python 3.9 and mpmath==1.3.0 with
 * `pip install -e .`, the official spec for 1.7 less flake8-comprehensions, which the local mirror lacks.
 */
export const SWE_BENCH_20590 = {
  repo: 'sympy/sympy',
  instance_id: 'sympy__sympy-20590',
  base_commit: 'cffd4e0f86fefd4802349a9f9b19ed70934ea354',
  head: '7c1516fce8d728cde56c17d0d69c56fa050f26e5',
  tests: ['sympy/core/tests/test_basic.py'],
  version: '1.7',
  FAIL_TO_PASS: ['test_immutable'],
  python: '3.9',
  pip_packages: ['mpmath==1.3.0'],
  install: 'python -m pip install -e .',
};

/** the row of SWE_BENCH_20590 made from the repository under `repos` (null: it does not hold the commits) */
export function rowFromRepository(repos: string): SweInstance | null {
  const r = SWE_BENCH_20590;
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', join(repos, r.repo), ...args], { encoding: 'utf8' });
  try {
    const from = git('merge-base', r.base_commit, r.head).trim();
    return parseRow('bench row', undefined, {
      repo: r.repo,
      instance_id: r.instance_id,
      base_commit: r.base_commit,
      patch: git('diff', from, r.head, '--', '.', ...r.tests.map((t) => `:(exclude)${t}`)),
      test_patch: git('diff', from, r.head, '--', ...r.tests),
      problem_statement: `(see ${r.instance_id})`,
      version: r.version,
      FAIL_TO_PASS: JSON.stringify(r.FAIL_TO_PASS),
      PASS_TO_PASS: '[]',
      environment_setup_commit: r.base_commit,
      python: r.python,
      pip_packages: r.pip_packages,
      install: r.install,
    });
  } catch {
    return null;
  }
}

export async function benchEvalReal(): Promise<void> {
  const repos = process.env.POLAR_BENCH_EVAL_REPOS;
  const dataset = process.env.POLAR_BENCH_EVAL_DATASET;
  const id = process.env.POLAR_BENCH_EVAL_INSTANCE ?? SWE_BENCH_20590.instance_id;
  if (!repos || !existsSync(repos) || (dataset && !existsSync(dataset))) {
    console.log(
      `eval on a real repository: skipped (set POLAR_BENCH_EVAL_REPOS to a --repos folder holding the repository, e.g. DIR/sympy/sympy, and optionally POLAR_BENCH_EVAL_DATASET to a dataset holding ${id}; given: ${repos ?? 'none'}, ${dataset ?? 'none'})`,
    );
    return;
  }
  const instance = dataset
    ? (await loadDataset(dataset)).find((i) => i.instance_id === id)
    : id === SWE_BENCH_20590.instance_id
      ? rowFromRepository(repos)
      : undefined;
  if (!instance) {
    console.log(
      `eval on a real repository: skipped (${dataset ? `${dataset} holds no ${id}` : `${join(repos, SWE_BENCH_20590.repo)} does not hold ${SWE_BENCH_20590.base_commit.slice(0, 12)} and ${SWE_BENCH_20590.head.slice(0, 12)}, or ${id} needs POLAR_BENCH_EVAL_DATASET`})`,
    );
    return;
  }
  const runs = Number(process.env.POLAR_BENCH_EVAL_RUNS ?? 3);
  const kind = process.env.POLAR_BENCH_EVAL_RUNTIME === 'local' ? 'local' : 'sandbox';
  const tmp = mkdtempSync(join(tmpdir(), 'polar-bench-eval-real-'));
  const environments = new Environments({ cacheDir: join(tmp, 'envs'), reposDir: repos });
  const cached = new HistoryStore({ cacheDir: join(tmp, 'history') });
  const runtimeWith = (history: HistoryStore, installMemo = true): Runtime =>
    kind === 'local'
      ? new LocalRuntime({ reposDir: repos, environments, history })
      : new SandboxRuntime({ reposDir: repos, environments, history, installMemo });
  const rows: Array<{ mode: string; phases: Phases }> = [];
  const one = async (mode: string, history: HistoryStore, installMemo = true) => {
    const phases: Phases = {};
    const runtime = timed(runtimeWith(history, installMemo), phases);
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
    phases.other = phases.overhead! - PHASES.reduce((a, k) => a + (phases[k] ?? 0), 0);
    rows.push({ mode, phases });
    rmSync(out, { recursive: true, force: true });
  };
  try {
    console.log(
      `eval on a real repository: ${id} at ${instance.base_commit.slice(0, 12)}, gold, ${kind}, concurrency 1, sample folders under ${tmpdir()} (TMPDIR)`,
    );
    await one('cold', cached);
    for (let i = 0; i < runs; i++) {
      await one('warm', cached);
      if (kind === 'sandbox') await one('install every run', cached, false);
      await one('history per run', new HistoryStore({ cacheDir: join(tmp, `history-${i}`) }));
    }
    const cols = ['total', 'tests', 'overhead', ...PHASES, 'other'];
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
    const installing = kind === 'sandbox' ? mean('install every run', 'overhead') : null;
    console.log(
      `warm overhead ${ms(overhead)} ms a sample (${(overhead / tests).toFixed(2)}x the tests' ${ms(tests)} ms; goal <= 3000 ms and <= 0.5x)${installing === null ? '' : ` | with the install run every sample (no install memo) ${ms(installing)} ms (${(installing / overhead).toFixed(1)}x)`} | with the history fetched every run ${ms(before)} ms (${(before / overhead).toFixed(1)}x) | cold ${ms(rows[0]?.phases.overhead)} ms (environment built, build requirements fetched, history fetched, validated)`,
    );
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
