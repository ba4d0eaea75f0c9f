// The tiers of the test suite (README, "Set up and test"), read by scripts/test.mjs. A test file that no
// tier below names is in the fast tier, `unit` (`npm run test:unit`): it starts no Python, no harness
// binary and no browser, and trains nothing. A test that does one of these is named here, under the
// tier of the slowest thing it starts; an entry ending in `/` is a folder. `npm test` runs every tier,
// in TIER_ORDER.

// A tier may set `concurrency` (test files at once; scripts/test.mjs's default is 2, POLAR_TEST_CONCURRENCY).

// The fast tier's test files at once. Its tests mostly wait (timers, sockets, child processes), so 4 on 2
// cores beat 2: 124-164 s against 146-195 s for the tier, runs alternated on a quiet machine, 2026-12-02/03.
export const UNIT_CONCURRENCY = 4;
/** @type {Record<string, { about: string, files: string[], concurrency?: number }>} */
export const TIERS = {
  swe: {
    about: 'SWE fixture tasks run for real: git clones, patches, the fixtures’ tests (pytest, node:test)',
    files: [
      'test/unit/eval/',
      'test/unit/rollout/run/',
      'test/unit/backends/wiring.test.ts',
      'test/unit/rollout/executors/merge.test.ts',
      'test/unit/gym/continuity.test.ts',
      'test/unit/gym/nemo-rl.test.ts',
      'test/unit/gym/row-trust.test.ts',
      'test/unit/rollout/dataset-repos.test.ts',
      'test/unit/rollout/integrity-attacks.test.ts',
      'test/unit/rollout/judge.test.ts',
      'test/unit/rollout/setup.test.ts',
      'test/unit/rollout/sigkill-temp.test.ts',
      'test/unit/rollout/swebench.test.ts',
      'test/unit/rollout/tampering.test.ts',
      'test/unit/rollout/verifier.test.ts',
    ],
  },
  python: {
    about:
      'starts Python: the PyTorch train worker, export, environments (venvs, pip), a stdlib probe, the log-parser oracle',
    files: [
      'test/unit/env/',
      'test/unit/export/',
      'test/unit/loop/preflight.test.ts',
      'test/unit/loop/publish-nccl.test.ts',
      'test/unit/setup/',
      'test/unit/train/cli.test.ts',
      'test/unit/train/probe.test.ts',
      'test/unit/train/python-worker.test.ts',
      'test/unit/train/python-worker-train.test.ts',
      'test/unit/train/report-to.test.ts',
    ],
  },
  // before e2e: tierOf takes the first tier naming a file, and these are inside test/e2e/
  learn: {
    about:
      'the loop learns: GRPO through Pi on CPU, one file at a time (two at once starve each other of the 2 cores: torch threads and the embedded model)',
    files: [
      'test/e2e/loop-learns.test.ts',
      'test/e2e/loop-learns-async.test.ts',
      'test/e2e/quickstart.test.ts',
    ],
    concurrency: 1,
  },
  e2e: {
    about:
      'real harness binaries (Codex CLI, Claude Code, Pi, Qwen Code) under polar; loop and gym end to end',
    files: ['test/e2e/'],
  },
  browser: {
    about: 'Chromium renders the polar inspect page',
    files: ['test/unit/inspect/browser.test.ts'],
  },
};

// The slowest files, started before the rest of their tier so that it does not end on one of them running
// alone (node --test starts files in the order given). Most of their time is waiting (timers, child
// processes, a 31 s stream), not CPU. Measured one file at a time on 2 cores, 2026-12-03 (s): calls-at-close
// 40, credentials 21 (15 after the backend-wait fix), failed-write 12, exit-codes 11, sandbox 11, embedded 11,
// connections 9, check-shape 7, publish 7, watchdog-orphaned 7; check-graph (issue 44) 15 on a loaded machine.
export const SLOWEST_FIRST = [
  'test/unit/serve/calls-at-close.test.ts',
  'test/unit/capture/credentials.test.ts',
  'test/unit/capture/failed-write.test.ts',
  'test/unit/cli/exit-codes.test.ts',
  'test/unit/rollout/sandbox.test.ts',
  'test/unit/backends/embedded.test.ts',
  'test/unit/http/connections.test.ts',
  'test/unit/scripts/check-shape.test.ts',
  'test/unit/scripts/check-graph.test.ts',
  'test/unit/loop/publish.test.ts',
  'test/unit/harnesses/watchdog-orphaned.test.ts',
];

/** A tier's files in the order they start: SLOWEST_FIRST's first, then the rest as given. */
export function startOrder(files) {
  const rank = (f) => {
    const i = SLOWEST_FIRST.indexOf(f);
    return i < 0 ? SLOWEST_FIRST.length : i;
  };
  return files
    .map((f, i) => ({ f, i }))
    .sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i)
    .map(({ f }) => f);
}

/** The order `npm test` runs them in: the fast tier first. */
export const TIER_ORDER = ['unit', 'swe', 'python', 'e2e', 'learn', 'browser'];

/** The tier of a test file (a path relative to the repository root, `/`-separated). */
export function tierOf(file) {
  for (const [name, tier] of Object.entries(TIERS)) {
    if (tier.files.some((entry) => (entry.endsWith('/') ? file.startsWith(entry) : file === entry)))
      return name;
  }
  return 'unit';
}
