// The tiers of the test suite (README, "Set up and test"), read by scripts/test.mjs. A test file that no
// tier below names is in the fast tier, `unit` (`npm run test:unit`): it starts no Python, no harness
// binary and no browser, and trains nothing. A test that does one of these is named here, under the
// tier of the slowest thing it starts; an entry ending in `/` is a folder. `npm test` runs every tier,
// in TIER_ORDER.

// A tier may set `concurrency` (test files at once; scripts/test.mjs's default is 2, POLAR_TEST_CONCURRENCY).
/** @type {Record<string, { about: string, files: string[], concurrency?: number }>} */
export const TIERS = {
  swe: {
    about: 'SWE fixture tasks run for real: git clones, patches, the fixtures’ tests (pytest, node:test)',
    files: [
      'test/unit/eval/',
      'test/unit/backends/wiring.test.ts',
      'test/unit/cluster/merge.test.ts',
      'test/unit/gym/continuity.test.ts',
      'test/unit/gym/nemo-rl.test.ts',
      'test/unit/judge/judge.test.ts',
      'test/unit/rollout/setup.test.ts',
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
      'test/unit/train/cli.test.ts',
      'test/unit/train/probe.test.ts',
      'test/unit/train/python-worker.test.ts',
      'test/unit/train/report-to.test.ts',
    ],
  },
  // before e2e: tierOf takes the first tier naming a file, and these are inside test/e2e/
  learn: {
    about:
      'the loop learns: GRPO through Pi on CPU, one file at a time (two at once starve each other of the 2 cores: torch threads and the embedded model)',
    files: ['test/e2e/loop-learns.test.ts', 'test/e2e/loop-learns-async.test.ts'],
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
