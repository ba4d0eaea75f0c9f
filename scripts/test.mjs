#!/usr/bin/env node
// Runs the test suite with node's own test runner, through tsx, tier by tier (test/tiers.mjs): `npm test`
// runs every tier in turn and prints each one's wall time; `--tier NAME[,NAME]` runs those tiers
// (`npm run test:unit` is `--tier unit`); paths (files or folders) run just those files. Other `--`
// flags go to node --test. Node 20's --test does not expand globs, hence this file.
// The fast tier runs bundled (scripts/test-bundle.mjs: one JavaScript file per test file, no tsx in the
// test processes), unless POLAR_TEST_BUNDLE=0; the other tiers, and paths given, run the sources.
// The tests never see the user's HOME or polar cache (scripts/test-home.mjs): the run has a HOME of its
// own, each test file one under it, and the run fails when the user's polar cache changed meanwhile.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, relative } from 'node:path';
import { SLOWEST_FIRST, startOrder, TIER_ORDER, TIERS, tierOf, UNIT_CONCURRENCY } from '../test/tiers.mjs';
import { bundleTests } from './test-bundle.mjs';
import {
  describeDifferences,
  differences,
  realPlaces,
  removeHome,
  snapshot,
  testHome,
} from './test-home.mjs';

const root = new URL('..', import.meta.url).pathname;
const args = process.argv.slice(2);
const tierFlag = args.findIndex((a) => a === '--tier' || a.startsWith('--tier='));
let tierNames = null;
if (tierFlag >= 0) {
  const value = args[tierFlag].includes('=') ? args[tierFlag].split('=')[1] : args[tierFlag + 1];
  args.splice(tierFlag, args[tierFlag].includes('=') ? 1 : 2);
  tierNames = String(value ?? '')
    .split(',')
    .filter(Boolean);
  const unknown = tierNames.filter((t) => !TIER_ORDER.includes(t));
  if (unknown.length > 0 || tierNames.length === 0) {
    console.error(`unknown tier ${unknown.join(', ') || '(none)'}; tiers: ${TIER_ORDER.join(', ')}`);
    process.exit(2);
  }
}
const flags = args.filter((a) => a.startsWith('--'));
const targets = args.filter((a) => !a.startsWith('--'));

function collect(path, out) {
  const st = statSync(path);
  if (st.isFile()) {
    if (path.endsWith('.test.ts')) out.push(path);
    return out;
  }
  for (const name of readdirSync(path).sort()) {
    if (name === 'node_modules' || name.startsWith('.')) continue;
    collect(join(path, name), out);
  }
  return out;
}

// a manifest entry that names nothing would silently move a slow test into the fast tier
for (const [name, tier] of Object.entries(TIERS)) {
  for (const entry of tier.files) {
    if (!existsSync(join(root, entry))) {
      console.error(`test/tiers.mjs: tier ${name} names ${entry}, which does not exist`);
      process.exit(2);
    }
  }
}

for (const entry of SLOWEST_FIRST) {
  if (!existsSync(join(root, entry))) {
    console.error(`test/tiers.mjs: SLOWEST_FIRST names ${entry}, which does not exist`);
    process.exit(2);
  }
}

const concurrency = process.env.POLAR_TEST_CONCURRENCY ?? '2';
// the user's polar cache as it is before the run, and the run's own HOME
const watched = realPlaces().caches;
const before = snapshot(watched);
const isolated = testHome();
// the Python environment of `npm run setup:python` first on PATH: its python3 has pytest (SWE fixtures)
const venvBin = join(root, '.venv', 'bin');
const env = existsSync(venvBin)
  ? { ...isolated.env, PATH: `${venvBin}${delimiter}${process.env.PATH ?? ''}` }
  : isolated.env;
const OWN_HOME = join(root, 'test', 'support', 'own-home.mjs');

/** Removes the run's HOME; exits non-zero (naming what changed) when the user's polar cache changed. */
function finish(status) {
  removeHome(isolated.home);
  const changed = differences(before, snapshot(watched));
  if (changed.total > 0) {
    for (const line of describeDifferences(changed)) console.error(line);
    process.exit(status === 0 ? 1 : status);
  }
  process.exit(status);
}

function run(files, tierConcurrency, bundled = false) {
  const result = spawnSync(
    process.execPath,
    [
      ...(bundled ? [] : ['--import', 'tsx']),
      '--import',
      OWN_HOME,
      '--test',
      `--test-concurrency=${tierConcurrency ?? concurrency}`,
      '--test-timeout=600000',
      ...flags,
      ...files,
    ],
    { cwd: root, stdio: 'inherit', env },
  );
  return result.status ?? 1;
}

const all = collect(join(root, 'test'), []).map((f) => relative(root, f));

if (targets.length > 0) {
  const files = targets
    .flatMap((t) => collect(isAbsolute(t) ? t : join(root, t), []))
    .map((f) => relative(root, f));
  if (files.length === 0) {
    console.error('no test files found');
    finish(1);
  }
  // files of a tier that runs one file at a time keep to it here too
  const limits = files.map((f) => TIERS[tierOf(f)]?.concurrency).filter((c) => c !== undefined);
  finish(run(files, limits.length > 0 ? Math.min(...limits) : undefined));
}

const summary = [];
let failed = false;
for (const tier of tierNames ?? TIER_ORDER) {
  const files = startOrder(all.filter((f) => tierOf(f) === tier));
  if (files.length === 0) continue;
  console.log(`\n# tier ${tier}: ${files.length} files (${TIERS[tier]?.about ?? 'the fast tier'})`);
  const started = performance.now();
  const bundled = tier === 'unit' && process.env.POLAR_TEST_BUNDLE !== '0';
  const status = bundled
    ? run(await bundleTests(root, files), process.env.POLAR_TEST_CONCURRENCY ?? UNIT_CONCURRENCY, true)
    : run(files, TIERS[tier]?.concurrency);
  const seconds = (performance.now() - started) / 1000;
  summary.push({ tier, files: files.length, seconds, ok: status === 0 });
  if (status !== 0) failed = true;
}
console.log('\n# test time per tier');
for (const s of summary) {
  console.log(
    `#   ${s.tier.padEnd(8)} ${String(s.files).padStart(3)} files  ${s.seconds.toFixed(0).padStart(5)} s  ${s.ok ? 'pass' : 'FAIL'}`,
  );
}
const total = summary.reduce((a, s) => a + s.seconds, 0);
console.log(
  `#   ${'all'.padEnd(8)} ${String(summary.reduce((a, s) => a + s.files, 0)).padStart(3)} files  ${total.toFixed(0).padStart(5)} s`,
);
finish(failed ? 1 : 0);
