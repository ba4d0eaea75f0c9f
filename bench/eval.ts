/**
 * polar eval overhead: wall time per sample that is polar's own work (copying the repository twice,
 * taking and applying the patch, parsing the log), i.e. total minus the agent and the test command,
 * with --agent gold on the fixture tasks at concurrency 1 and 8. Target: under 1 s per instance.
 * Baseline in the same run: a bare `git clone --shared` + checkout of the same repos, the floor any
 * fresh-copy runtime pays twice per sample.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ensureFixtureRepos } from '../scripts/swe-fixtures.ts';
import { GoldAgent } from '../src/rollout/agents.ts';
import { loadDataset } from '../src/rollout/dataset.ts';
import { runEval } from '../src/rollout/run/run.ts';
import { LocalRuntime } from '../src/rollout/runtime/local.ts';

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
  for (const concurrency of [1, 8]) {
    const out = mkdtempSync(join(tmpdir(), 'polar-bench-eval-'));
    const started = performance.now();
    const { results } = await runEval({
      instances,
      agent: new GoldAgent(),
      runtime: new LocalRuntime({ reposDir }),
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
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) await benchEval();
