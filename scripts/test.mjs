#!/usr/bin/env node
// Runs the test suite with node's own test runner: every *.test.ts under test/ (or the folders/files
// given), through tsx. Node 20's --test does not expand globs, hence this file.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { delimiter, join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const args = process.argv.slice(2);
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

const files = (targets.length ? targets : ['test']).flatMap((t) => collect(join(root, t), []));
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
const concurrency = process.env.POLAR_TEST_CONCURRENCY ?? '2';
// the Python environment of `npm run setup:python` first on PATH: its python3 has pytest (SWE fixtures)
const venvBin = join(root, '.venv', 'bin');
const env = existsSync(venvBin)
  ? { ...process.env, PATH: `${venvBin}${delimiter}${process.env.PATH ?? ''}` }
  : process.env;
const result = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    `--test-concurrency=${concurrency}`,
    '--test-timeout=600000',
    ...flags,
    ...files.map((f) => relative(root, f)),
  ],
  { cwd: root, stdio: 'inherit', env },
);
process.exit(result.status ?? 1);
