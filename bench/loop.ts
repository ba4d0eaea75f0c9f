/**
 * `npm run bench -- loop`: wall time of `polar loop` for the same number of trained samples at
 * --max-staleness 0, 1 and 2 (the simulated cluster: under --overdue wait and drop), with the speed-up
 * over 0 (wait), the idle fraction of the trainer and of the rollout slots, and the fraction of slot time
 * spent on samples that were then dropped (busy, so not idle, but of no use to training).
 *
 * 1. A simulated cluster driving the real scheduler (at K >= 1 also under --overdue drop --oversample N) (src/loop/async.ts, StalenessScheduler): a stand-in
 *    agent whose time per sample follows a heavy-tailed distribution (Pareto, alpha 1.5: most samples are
 *    quick, a few take many times the median, as SWE tasks do), a trainer step of fixed cost, a fixed
 *    number of rollout slots. Times are virtual milliseconds (the same figures under any load;
 *    POLAR_BENCH_LOOP_CLOCK=real: real timers, with the load average printed), scaled down; the draws are seeded
 *    and keyed by (group, sample), so every K sees the same samples (POLAR_BENCH_LOOP_DRAW=task: by
 *    (task, sample), so that a task --overdue drop launches again is as slow as it was).
 * 2. The real tiny CPU loop: `polar loop` on the coin fixture, a tiny Llama through the embedded backend,
 *    Pi, the transformers trainer (needs .venv; POLAR_BENCH_LOOP_REAL=0 skips it). Slot idle fraction from
 *    the samples' recorded durations.
 *
 * Sizes: POLAR_BENCH_LOOP_STEPS (default 64: long enough that the first batch's wait, which no schedule
 * avoids, is a small part of the idle time; the real loop runs at most 3), POLAR_BENCH_LOOP_SCALE (ms per
 * unit of sample time, 20), POLAR_BENCH_LOOP_SEED (the draws, 7), POLAR_BENCH_LOOP_OVERSAMPLE (the
 * --oversample of the extra --overdue drop row at K >= 1, 2; 0: no such row).
 *
 * Publishing (issue 48): the same simulated run with each step's weights published after its training, by
 * a restart of the server or in place, the server answering nothing meanwhile (every running sample waits
 * out the publish, the trainer too). The publish times are parameters taken from published figures, in
 * seconds of a real run: POLAR_BENCH_LOOP_RESTART_S (default 82: vLLM's start with the model on local disk
 * and its compile cache warm, Llama-3.1-8B on an L40S: weight loading 18 s, Dynamo 10 s, graph compilation
 * 13 s, CUDA graph capture 7 s, engine init and imports 34 s; tensorfuse.io, "Reducing GPU Cold Start Time
 * when using vLLM", 2025-09-01), POLAR_BENCH_LOOP_INPLACE_S (default 18: the same page's weight loading,
 * what vLLM's disk weight transfer does of it; an NCCL broadcast is faster still: 0.15-0.6 s for Qwen2 0.5B,
 * huggingface/trl PR #5249); POLAR_BENCH_LOOP_TRAIN_S (default 300: the real seconds one simulated trainer
 * step stands for, which scales them into the simulation; an assumption, not a measurement). A restart
 * here costs its time alone: the calls it cuts and the prefix cache it loses are not modelled, so the
 * restart's column is the optimistic side. bench/publish_gpu.py measures both on a GPU.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { execa } from 'execa';
import { type AsyncDriver, type Journal, StalenessScheduler } from '../src/loop/async.ts';
import { DEFAULTS, type OverduePolicy } from '../src/options/defaults.ts';

const ROOT = resolve(import.meta.dirname, '..');

/** A seeded uniform in (0, 1) from two integers (splitmix-style). */
function uniform(a: number, b: number, seed: number): number {
  let x = (a * 0x9e3779b1 + b * 0x85ebca77 + seed * 0xc2b2ae3d) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d) >>> 0;
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b) >>> 0;
  x = (x ^ (x >>> 16)) >>> 0;
  return (x + 0.5) / 2 ** 32;
}

/** The number in a simulated task's name (task-N). */
const taskIndex = (task: string) => Number(task.slice('task-'.length));

/** Pareto(alpha) with minimum 1, capped at `cap` (a harness time limit). */
const pareto = (u: number, alpha: number, cap: number) => Math.min(cap, (1 - u) ** (-1 / alpha));

interface Cluster {
  steps: number;
  tasksPerStep: number;
  groupSize: number;
  slots: number;
  /** ms per unit of sample time (the minimum sample takes 1 unit) */
  scaleMs: number;
  trainMs: number;
  alpha: number;
  cap: number;
  /** draw a sample's time by its task rather than its group (a task launched again is as slow) */
  drawByTask: boolean;
  /** virtual milliseconds (the default) rather than real timers */
  virtual: boolean;
  /** the draws' seed */
  seed: number;
  /** each step's publish, after its training (ms; 0: none): the server answers nothing meanwhile */
  publishMs: number;
}

const noJournal: Journal = { append: async () => {} };

/** The simulation's time: real timers, or a virtual clock that no load on the machine stretches. */
interface Clock {
  now(): number;
  /** resolves after `ms`, or rejects as soon as one of `signals` is aborted */
  sleep(ms: number, ...signals: AbortSignal[]): Promise<void>;
  /** runs `work` to its end */
  run<T>(work: () => Promise<T>): Promise<T>;
}

/** Calls `stop` when one of `signals` is aborted; returns what takes the listeners off again. */
function onAbort(signals: AbortSignal[], stop: (reason: unknown) => void): () => void {
  const off = () => {
    for (const [s, l] of listeners) s.removeEventListener('abort', l);
  };
  const listeners = signals.map((s) => {
    const l = () => {
      off();
      stop(s.reason);
    };
    s.addEventListener('abort', l, { once: true });
    return [s, l] as const;
  });
  return off;
}

const realClock: Clock = {
  now: () => performance.now(),
  sleep: (ms, ...signals) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        off();
        resolve();
      }, ms);
      const off = onAbort(signals, (reason) => {
        clearTimeout(timer);
        reject(reason);
      });
    }),
  run: (work) => work(),
};

/**
 * Virtual milliseconds: the scheduler and the stand-in run on the event loop as ever, and whenever
 * nothing is left to run but sleepers, time jumps to the earliest one (ties in the order they slept).
 * Everything in the simulation awaits promises only (no real timers, no I/O), so a few turns of the
 * event loop settle all that a wake-up sets off; the figures are the same on every run and under any load.
 */
function virtualClock(): Clock {
  let t = 0;
  let seq = 0;
  const timers: Array<{ at: number; seq: number; fire: () => void; dead: boolean }> = [];
  const turn = () => new Promise((r) => setImmediate(r));
  return {
    now: () => t,
    sleep: (ms, ...signals) =>
      new Promise<void>((resolve, reject) => {
        const timer = { at: t + ms, seq: seq++, fire: () => {}, dead: false };
        timers.push(timer);
        const off = onAbort(signals, (reason) => {
          timer.dead = true;
          reject(reason);
        });
        timer.fire = () => {
          off();
          resolve();
        };
      }),
    async run(work) {
      let done = false;
      const p = work().finally(() => {
        done = true;
      });
      p.catch(() => {});
      for (;;) {
        for (let i = 0; i < 3; i++) await turn();
        if (done) return p;
        let next = -1;
        for (let i = 0; i < timers.length; i++) {
          const x = timers[i]!;
          if (x.dead) continue;
          const best = timers[next];
          if (!best || x.at < best.at || (x.at === best.at && x.seq < best.seq)) next = i;
        }
        if (next < 0) throw new Error('the simulation stalled: nothing runs and nothing sleeps');
        const [timer] = timers.splice(next, 1);
        t = Math.max(t, timer!.at);
        timer!.fire();
        for (let i = timers.length - 1; i >= 0; i--) if (timers[i]!.dead) timers.splice(i, 1);
      }
    },
  };
}

/**
 * The server's time out of service (publishes), and a sample's work served around it: `ms` of service
 * takes longer by every part of a publish that overlaps it (a sample that starts during one waits for it).
 */
function serverWindows(clock: Clock) {
  const windows: Array<[number, number]> = [];
  const overlap = (from: number, to: number) =>
    windows.reduce((sum, [a, b]) => sum + Math.max(0, Math.min(b, to) - Math.max(a, from)), 0);
  return {
    async publish(ms: number) {
      if (ms <= 0) return;
      windows.push([clock.now(), clock.now() + ms]);
      await clock.sleep(ms);
    },
    async serve(ms: number, ...signals: AbortSignal[]) {
      let from = clock.now();
      for (let need = ms; need > 0; ) {
        await clock.sleep(need, ...signals);
        need = overlap(from, clock.now());
        from = clock.now();
      }
    },
  };
}

async function simulate(c: Cluster, K: number, overdue: OverduePolicy, oversample = 0) {
  const clock = c.virtual ? virtualClock() : realClock;
  const server = serverWindows(clock);
  const driver: AsyncDriver = {
    taskFor: (step, index) => `task-${(step - 1) * c.tasksPerStep + index}`,
    async runGroup(plan, ctx) {
      await Promise.all(
        Array.from({ length: c.groupSize }, (_, sample) =>
          ctx.withSlot(sample, async () => {
            // keyed by (group, sample): a dropped group's task launched again draws afresh, as a retry
            // of a sample does; POLAR_BENCH_LOOP_DRAW=task keys by (task, sample): a slow task stays slow
            const key = c.drawByTask ? taskIndex(plan.task) : plan.group;
            const units = pareto(uniform(key, sample, c.seed), c.alpha, c.cap);
            await server.serve(units * c.scaleMs, ctx.cancel, ctx.signal);
          }),
        ),
      );
    },
    async train() {
      await clock.sleep(c.trainMs);
      await server.publish(c.publishMs);
    },
  };
  const s = new StalenessScheduler(
    {
      steps: c.steps,
      tasksPerStep: c.tasksPerStep,
      groupSize: c.groupSize,
      slots: c.slots,
      maxStaleness: K,
      overdue,
      oversample,
      version: 0,
      journal: noJournal,
      clock: clock.now,
    },
    driver,
  );
  await clock.run(() => s.run());
  const { wallMs, trainBusyMs, slotBusyMs, slots, trainWaitDueMs, slotHeldMs, slotWastedMs } = s.stats;
  return {
    wallMs,
    trainerIdle: 1 - trainBusyMs / wallMs,
    slotIdle: 1 - slotBusyMs / (slots * wallMs),
    slotWasted: slotWastedMs / (slots * wallMs),
    // the parts of the idle time the staleness bound imposes (src/loop/async.ts, SchedulerStats)
    trainerWaitDue: trainWaitDueMs / wallMs,
    slotHeld: slotHeldMs / (slots * wallMs),
  };
}

const pct = (x: number) => `${(100 * x).toFixed(0)}%`;

async function realLoop(K: number, steps: number): Promise<{ wallMs: number; slotIdle: number } | null> {
  const work = mkdtempSync(join(tmpdir(), `polar-bench-loop-${K}-`));
  const run = join(work, 'run');
  const concurrency = 2;
  const args = [
    join(ROOT, 'bin/polar'),
    'loop',
    ...['--train-set', join(ROOT, 'fixtures/loop/coin.jsonl'), '--harness', 'pi', '--backend', 'embedded'],
    ...[
      '--model',
      `${DEFAULTS.tinyTrialModel.value},seed=1`,
      '--max-tokens-cap',
      '12',
      '--group-size',
      '2',
      '--tasks-per-step',
      '2',
    ],
    ...['--steps', String(steps), '--eval-every', '0', '--runtime', 'local', '--allow-unsandboxed'],
    ...['--repos', join(ROOT, 'fixtures/swe/repos'), '--grade-empty-patches', '--device', 'cpu'],
    ...['--lr', '0.05', '--concurrency', String(concurrency), '--max-staleness', String(K), '-q'],
    ...['--out', run],
  ];
  const t0 = performance.now();
  const r = await execa('node', args, { reject: false, cwd: work, env: { POLAR_OFFLINE: '1' } });
  const wallMs = performance.now() - t0;
  if (r.exitCode !== 0) {
    console.log(`  real loop at K=${K} failed (${r.exitCode}): ${String(r.stderr).slice(-500)}`);
    return null;
  }
  // the samples' own time, from their result lines (sync: step-N/eval; async: groups/g-N)
  const dirs =
    K === 0
      ? Array.from({ length: steps }, (_, i) => join(run, `step-${i + 1}`, 'eval'))
      : (await readdir(join(run, 'groups'))).map((g) => join(run, 'groups', g));
  let busy = 0;
  for (const d of dirs) {
    for (const line of (await readFile(join(d, 'results.jsonl'), 'utf8')).split('\n')) {
      if (line.trim()) busy += JSON.parse(line).durations_ms.total as number;
    }
  }
  return { wallMs, slotIdle: 1 - busy / (concurrency * wallMs) };
}

export async function benchLoop(): Promise<void> {
  const steps = Number(process.env.POLAR_BENCH_LOOP_STEPS ?? 64);
  const c: Cluster = {
    steps,
    tasksPerStep: 4,
    groupSize: 4,
    slots: 8,
    scaleMs: Number(process.env.POLAR_BENCH_LOOP_SCALE ?? 20),
    trainMs: 0,
    alpha: 1.5,
    cap: 30,
    drawByTask: process.env.POLAR_BENCH_LOOP_DRAW === 'task',
    virtual: process.env.POLAR_BENCH_LOOP_CLOCK !== 'real',
    seed: Number(process.env.POLAR_BENCH_LOOP_SEED ?? 7),
    publishMs: 0,
  };
  // a trainer step as long as a step's rollouts take on average (samples / slots x the Pareto mean
  // alpha / (alpha - 1)): the balance at which overlapping them pays most
  c.trainMs = Math.round(((c.tasksPerStep * c.groupSize) / c.slots) * (c.alpha / (c.alpha - 1)) * c.scaleMs);
  console.log(
    `\n## loop: simulated cluster, ${c.steps} steps x ${c.tasksPerStep} groups x ${c.groupSize} samples, ` +
      `${c.slots} slots, sample time Pareto(alpha ${c.alpha}) x ${c.scaleMs} ms (cap ${c.cap}x) drawn per ` +
      `${c.drawByTask ? 'task' : 'group'} (seed ${c.seed}), trainer step ${c.trainMs} ms`,
  );
  // real timers' figures are wall times: a loaded machine stretches them (say the load with them)
  const load = () =>
    loadavg()
      .map((x) => x.toFixed(2))
      .join(' ');
  console.log(
    c.virtual
      ? '  virtual clock (POLAR_BENCH_LOOP_CLOCK=real for timers): the same figures under any load'
      : `  real timers; load average at the start: ${load()}`,
  );
  let base = 0;
  const E = Number(process.env.POLAR_BENCH_LOOP_OVERSAMPLE ?? 2);
  // (at K = 0 no group is ever overdue: polar loop refuses --overdue drop there)
  const policies = (K: number) =>
    K === 0
      ? [{ overdue: 'wait' as const, oversample: 0 }]
      : [
          { overdue: 'wait' as const, oversample: 0 },
          { overdue: 'drop' as const, oversample: 0 },
          ...(E > 0 ? [{ overdue: 'drop' as const, oversample: E }] : []),
        ];
  for (const K of [0, 1, 2]) {
    for (const { overdue, oversample } of policies(K)) {
      const r = await simulate(c, K, overdue, oversample);
      if (K === 0 && overdue === 'wait') base = r.wallMs;
      console.log(
        `  --max-staleness ${K} --overdue ${overdue}${oversample ? ` --oversample ${oversample}` : ''}: ${(r.wallMs / 1000).toFixed(2)} s, ` +
          `speed-up ${(base / r.wallMs).toFixed(2)}x, ` +
          `idle: trainer ${pct(r.trainerIdle)} (${pct(r.trainerWaitDue)} waiting for a group the bound cannot carry), ` +
          `rollout slots ${pct(r.slotIdle)} (${pct(r.slotHeld)} while the bound held the next groups back); ` +
          `slot time wasted on dropped samples ${pct(r.slotWasted)}`,
      );
    }
  }
  if (!c.virtual) console.log(`  load average at the end: ${load()}`);
  await publishColumn(c);
  if (process.env.POLAR_BENCH_LOOP_REAL === '0') return;
  if (!existsSync(join(ROOT, '.venv'))) {
    console.log('  (real loop skipped: no .venv; npm run setup:python)');
    return;
  }
  const realSteps = Math.min(steps, 3);
  console.log(
    `\n## loop: the real tiny CPU loop (coin fixture, ${realSteps} steps x 2 tasks x 2 samples, Pi, embedded)`,
  );
  let realBase = 0;
  for (const K of [0, 1, 2]) {
    const r = await realLoop(K, realSteps);
    if (!r) continue;
    if (K === 0) realBase = r.wallMs;
    console.log(
      `  --max-staleness ${K}: ${(r.wallMs / 1000).toFixed(1)} s` +
        `${realBase ? `, speed-up ${(realBase / r.wallMs).toFixed(2)}x` : ''}, idle rollout slots ${pct(r.slotIdle)}`,
    );
  }
}

/**
 * The publish-time column: the simulated run above (--overdue wait) with each step published by a restart
 * and in place, side by side, at K = 0, 1 and 2; the restart's and the in-place update's seconds are the
 * parameters the header names, scaled by the real seconds a trainer step stands for.
 */
async function publishColumn(c: Cluster): Promise<void> {
  const restartS = Number(process.env.POLAR_BENCH_LOOP_RESTART_S ?? 82);
  const inPlaceS = Number(process.env.POLAR_BENCH_LOOP_INPLACE_S ?? 18);
  const trainS = Number(process.env.POLAR_BENCH_LOOP_TRAIN_S ?? 300);
  const scaled = (s: number) => Math.round((s / trainS) * c.trainMs);
  console.log(
    `\n## loop: publishing each step's weights, by a restart (${restartS} s) or in place (${inPlaceS} s), ` +
      `a trainer step standing for ${trainS} s (the same simulated run, --overdue wait)`,
  );
  for (const K of [0, 1, 2]) {
    const none = await simulate(c, K, 'wait');
    const restart = await simulate({ ...c, publishMs: scaled(restartS) }, K, 'wait');
    const inPlace = await simulate({ ...c, publishMs: scaled(inPlaceS) }, K, 'wait');
    const real = (ms: number) => ((ms / c.trainMs) * trainS) / 60;
    console.log(
      `  --max-staleness ${K}: wall, in real minutes over ${c.steps} steps: no publish ${real(none.wallMs).toFixed(0)}, ` +
        `restart ${real(restart.wallMs).toFixed(0)}, in place ${real(inPlace.wallMs).toFixed(0)} ` +
        `(in place ${(restart.wallMs / inPlace.wallMs).toFixed(2)}x the restart's speed); ` +
        `idle rollout slots: restart ${pct(restart.slotIdle)}, in place ${pct(inPlace.slotIdle)}`,
    );
  }
}
