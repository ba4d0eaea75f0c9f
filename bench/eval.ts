/**
 * polar eval overhead: wall time per sample that is polar's own work (copying the repository twice,
 * taking and applying the patch, parsing the log), i.e. total minus the agent and the test command,
 * with --agent gold on the fixture tasks at concurrency 1 and 8. Target: under 1 s per instance.
 * Baseline in the same run: a bare `git clone --shared` + checkout of the same repos, the floor any
 * fresh-copy runtime pays twice per sample. Then the overhead by phase on a real large repository
 * (bench/eval-real.ts: POLAR_BENCH_EVAL_REPOS, and POLAR_BENCH_EVAL_DATASET if given; skipped without them).
 *
 * Then the grading time the integrity layers add (issue 45; docs/eval.md, "Grading integrity"): the
 * same gold samples graded with the layers (restore, locked-down run, report, canaries, scan) and
 * without them (the official script's run, `hardened: false`), alternated round by round
 * (POLAR_BENCH_ROUNDS, default 3) at concurrency 1; a sample's grading time is its wall time minus the
 * agent's. The raw table, then the medians and their ratio.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ensureFixtureRepos } from '../scripts/swe-fixtures.ts';
import { GoldAgent } from '../src/rollout/agents.ts';
import { loadDataset } from '../src/rollout/dataset.ts';
import { runEval } from '../src/rollout/run/run.ts';
import { HistoryStore } from '../src/rollout/runtime/history.ts';
import { LocalRuntime } from '../src/rollout/runtime/local.ts';
import { benchEvalReal } from './eval-real.ts';

const ROOT = resolve(import.meta.dirname, '..');

export async function benchEval(): Promise<void> {
  ensureFixtureRepos();
  const reposDir = join(ROOT, 'fixtures/swe/repos');
  const instances = await loadDataset(join(ROOT, 'fixtures/swe/mini.jsonl'));
  const t0 = performance.now();
  for (const i of instances) {
    const dir = mkdtempSync(join(tmpdir(), 'polar-bench-clone-'));
    execFileSync('git', ['clone', '-q', '--shared', '--no-checkout', join(reposDir, i.repo), join(dir, 'r')]);
    execFileSync('git', ['-C', join(dir, 'r'), 'checkout', '-q', '--detach', i.base_commit]);
    rmSync(dir, { recursive: true, force: true });
  }
  const cloneMs = (performance.now() - t0) / instances.length;
  console.log(`baseline: bare clone+checkout ${cloneMs.toFixed(0)} ms per instance`);
  // the history repositories in a cache of this run's own (made by the first run, reused by the second)
  const historyDir = mkdtempSync(join(tmpdir(), 'polar-bench-history-'));
  const history = new HistoryStore({ cacheDir: historyDir });
  for (const concurrency of [1, 8]) {
    const out = mkdtempSync(join(tmpdir(), 'polar-bench-eval-'));
    const started = performance.now();
    const { results } = await runEval({
      instances,
      agent: new GoldAgent(),
      runtime: new LocalRuntime({ reposDir, history }),
      out,
      samples: 1,
      concurrency,
      agentTimeoutMs: 60_000,
      testTimeoutMs: 120_000,
      resume: false,
      dataset: 'mini',
      progress: false,
    });
    const wall = performance.now() - started;
    const overhead = results.map((r) => r.durations_ms.overhead);
    const mean = overhead.reduce((a, b) => a + b, 0) / overhead.length;
    const resolved = results.filter((r) => r.resolved).length;
    console.log(
      `eval overhead @ concurrency ${concurrency}: mean ${mean.toFixed(0)} ms, max ${Math.max(...overhead).toFixed(0)} ms per instance ` +
        `(${(mean / cloneMs).toFixed(1)}x bare clone; target < 1000 ms) — wall ${(wall / 1000).toFixed(1)} s for ${results.length}, ${resolved} resolved`,
    );
    rmSync(out, { recursive: true, force: true });
  }
  rmSync(historyDir, { recursive: true, force: true });
  await benchEvalReal();
  await benchIntegrity();
}

/** per-sample grading ms of one run of the fixtures with the layers on or off */
async function gradingRun(
  instances: Awaited<ReturnType<typeof loadDataset>>,
  reposDir: string,
  hardened: boolean,
  history: HistoryStore,
): Promise<{ grading: number[]; tests: number[]; resolved: number }> {
  const out = mkdtempSync(join(tmpdir(), 'polar-bench-integrity-'));
  try {
    const { results } = await runEval({
      instances,
      agent: new GoldAgent(),
      runtime: new LocalRuntime({ reposDir, history }),
      out,
      samples: 1,
      concurrency: 1,
      agentTimeoutMs: 60_000,
      testTimeoutMs: 120_000,
      resume: false,
      dataset: 'mini',
      progress: false,
      hardened,
    });
    return {
      grading: results.map((r) => r.durations_ms.total - r.durations_ms.agent),
      tests: results.map((r) => r.durations_ms.tests),
      resolved: results.filter((r) => r.resolved).length,
    };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0
    ? Number.NaN
    : s.length % 2
      ? s[(s.length - 1) / 2]!
      : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** The grading time the integrity layers add: with and without, alternated, in one run. */
export async function benchIntegrity(): Promise<void> {
  ensureFixtureRepos();
  const reposDir = join(ROOT, 'fixtures/swe/repos');
  const instances = await loadDataset(join(ROOT, 'fixtures/swe/mini.jsonl'));
  const rounds = Number(process.env.POLAR_BENCH_ROUNDS ?? 3);
  const all: Record<'with' | 'without', number[]> = { with: [], without: [] };
  // (the history repositories in a cache of the bench's own, never the user's)
  const historyDir = mkdtempSync(join(tmpdir(), 'polar-bench-history-'));
  const history = new HistoryStore({ cacheDir: historyDir });
  console.log(
    '\ngrading time per sample, gold on the 8 fixture tasks, concurrency 1 (ms; layers: docs/eval.md)',
  );
  console.log('round  layers    mean  median  tests(mean)  resolved');
  for (let round = 1; round <= rounds; round++) {
    for (const on of round % 2 ? [true, false] : [false, true]) {
      const r = await gradingRun(instances, reposDir, on, history);
      all[on ? 'with' : 'without'].push(...r.grading);
      const mean = r.grading.reduce((a, b) => a + b, 0) / r.grading.length;
      const tests = r.tests.reduce((a, b) => a + b, 0) / r.tests.length;
      console.log(
        `${String(round).padStart(5)}  ${(on ? 'with' : 'without').padEnd(7)} ${mean.toFixed(0).padStart(6)} ${median(r.grading).toFixed(0).padStart(7)} ${tests.toFixed(0).padStart(12)}  ${r.resolved}/${instances.length}`,
      );
    }
  }
  const w = median(all.with);
  const wo = median(all.without);
  console.log(
    `integrity layers: median grading ${w.toFixed(0)} ms per sample with, ${wo.toFixed(0)} ms without: ${w >= wo ? '+' : ''}${(w - wo).toFixed(0)} ms (${(w / wo).toFixed(2)}x), over ${rounds} alternated rounds`,
  );
  rmSync(historyDir, { recursive: true, force: true });
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) await benchEval();
