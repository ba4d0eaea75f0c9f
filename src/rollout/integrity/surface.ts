/**
 * The test surface: every file that decides which tests run and how they report, rather than what the
 * code under test does. Before the graded test run polar puts all of it back as it was at base_commit:
 * each such file the agent's patch changed or deleted is checked out from base_commit, each one it added
 * is removed, and the test patch's own files are reset (as the official script does) before the test
 * patch is applied. The official harness resets only the test patch's files, so a planted conftest.py,
 * pytest.ini, `.pth`, test helper or `*.dist-info` survived into the graded run
 * (reward-integrity.md A1/A2/A7). What counts (isTestSurface):
 * - tests: any file under a directory named like a test folder (`test`, `tests`, `testing`, `__tests__`,
 *   `e2e`, `test_x`, `x_tests`, ...), test files by name (`test_*.py`, `*_test.py`, `tests.py`,
 *   `*.test.js`, `*.spec.ts`, ...): SWE-bench's own split puts every such path into `test_patch`, so a
 *   gold patch never holds one;
 * - runner set-up: conftest.py, pytest.ini, .pytest.ini, tox.ini, noxfile.py, .coveragerc, runtests.py,
 *   run_tests.py, bin/test, jest/vitest/mocha/karma configs;
 * - start-up hooks: sitecustomize.py, usercustomize.py, `*.pth`;
 * - package metadata that can declare a pytest plugin: anything inside `*.dist-info` / `*.egg-info`,
 *   `entry_points.txt`.
 * Shared files (setup.cfg, pyproject.toml, package.json, setup.py) are not restored whole: a real fix may
 * change them; their test sections and entry points are flagged instead (scan.ts, tampering.ts).
 */
import { shellQuote } from '../patch.ts';
import { diffFiles } from '../specs.ts';
import { parseDiff, touchedPaths } from './diff.ts';

export type SurfaceKind = 'test' | 'runner' | 'startup-hook' | 'metadata';

const TEST_DIR = /^(tests?|testing|__tests__|e2e|spec|unittests?|(?:.*[_.-])?tests?|tests?[_.-].*)$/i;
const TEST_FILE =
  /^(test_.*\.py|.*_tests?\.py|tests?\.py|.*\.(test|spec)\.[cm]?[jt]sx?|.*_(test|spec)\.[cm]?[jt]sx?)$/i;
const RUNNER_FILES = new Set([
  'conftest.py',
  'pytest.ini',
  '.pytest.ini',
  'tox.ini',
  'noxfile.py',
  '.coveragerc',
  'runtests.py',
  'run_tests.py',
]);
const RUNNER_CONFIG =
  /^(jest|vitest|karma|ava|playwright)\.conf(ig)?\.[cm]?[jt]s(on)?$|^\.mocharc(\..*)?$|^\.nycrc/i;
const STARTUP = /^(sitecustomize|usercustomize)\.py$|\.pth$/i;

/** Why `path` (repository-relative) belongs to the test surface, or null. */
export function isTestSurface(path: string): SurfaceKind | null {
  const parts = path.split('/');
  const name = parts.at(-1) ?? '';
  const dirs = parts.slice(0, -1);
  if (dirs.some((d) => /\.(dist-info|egg-info)$/i.test(d)) || name === 'entry_points.txt') return 'metadata';
  if (STARTUP.test(name)) return 'startup-hook';
  if (RUNNER_FILES.has(name) || RUNNER_CONFIG.test(name) || path === 'bin/test') return 'runner';
  // a folder named like a test folder anywhere, the file's own name included (a file called `tests`
  // in place of the folder would stop the test patch from applying)
  if (parts.some((p) => TEST_DIR.test(p)) || TEST_FILE.test(name)) return 'test';
  return null;
}

/**
 * The paths to put back as base_commit has them before the test patch: the test patch's own files
 * (the official reset) and every test-surface path the agent's patch touches, old and new sides.
 */
export function surfacePaths(agentPatch: string, testPatch: string): string[] {
  const out = new Set(diffFiles(testPatch));
  for (const path of touchedPaths(parseDiff(agentPatch))) if (isTestSurface(path)) out.add(path);
  return [...out];
}

/** The agent's files the restore puts back or removes (test patch files aside), for the result line. */
export function restoredAgentFiles(agentPatch: string, testPatch: string): string[] {
  const own = new Set(diffFiles(testPatch));
  return touchedPaths(parseDiff(agentPatch)).filter((p) => isTestSurface(p) && !own.has(p));
}

/**
 * git without what a sample could have planted in the grading tree's .git (its install step runs the
 * sample's code): no hooks, no fsmonitor, no replace refs. The tree is the grader's own fresh checkout.
 */
export const HARDENED_GIT =
  "GIT_NO_REPLACE_OBJECTS=1 git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c safe.directory='*'";

/**
 * Shell lines that restore `paths` to `base`: first every path base does not have is removed (a folder
 * in place of a file too), then the ones it has are checked out from it. Exit 98 when one cannot be put
 * back (the grader then refuses to run the tests on a surface it could not restore).
 */
export function restoreScript(base: string, paths: string[]): string[] {
  if (paths.length === 0) return [];
  return [
    `set -- ${paths.map(shellQuote).join(' ')}`,
    'polar_keep=()',
    'for p in "$@"; do',
    `  if ${HARDENED_GIT} cat-file -e ${shellQuote(base)}:"$p" 2>/dev/null; then polar_keep+=("$p"); rm -rf -- "$p"; else rm -rf -- "$p"; fi`,
    'done',
    `if [ \${#polar_keep[@]} -gt 0 ]; then ${HARDENED_GIT} checkout -q ${shellQuote(base)} -- "\${polar_keep[@]}" || { echo ">>>>> polar: the test surface could not be restored"; exit 98; }; fi`,
  ];
}
