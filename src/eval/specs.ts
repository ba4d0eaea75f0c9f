/**
 * How each repository is tested: the test command, the log parser, and how the test files of a
 * test_patch become arguments. Values follow swebench 4.x (swebench/harness/constants/python.py,
 * MAP_REPO_VERSION_TO_SPECS / MAP_REPO_TO_PARSER, and test_spec/python.py get_test_directives) for the
 * 12 SWE-bench Verified repositories; other datasets name `test_cmd` (and `log_parser`) per row, or
 * bring a full 5.x `eval_script`.
 */
import type { SweInstance } from './dataset.ts';
import { resolveParserName } from './log-parsers/index.ts';

export interface TestSpec {
  /** shell command the test files are appended to */
  testCmd: string;
  /** log parser name (see log-parsers/index.ts) */
  parser: string;
  /** how test_patch files become arguments */
  directives: 'paths' | 'django-modules' | 'none';
}

const PYTEST = 'pytest -rA';
const ASTROPY = 'pytest -rA -vv -o console_output_style=classic --tb=no';
const DJANGO = './tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1';
const DJANGO_NO_PARALLEL = './tests/runtests.py --verbosity 2';
const SEABORN = 'pytest --no-header -rA';
const SPHINX = 'tox --current-env -epy39 -v --';
const SYMPY = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose";

interface RepoSpec {
  parser: string;
  cmd: (version: string) => string;
  directives?: TestSpec['directives'];
}

export const REPO_SPECS: Record<string, RepoSpec> = {
  'astropy/astropy': { parser: 'pytest-v2', cmd: () => ASTROPY },
  'django/django': {
    parser: 'django',
    cmd: (v) => (v === '1.9' ? DJANGO_NO_PARALLEL : DJANGO),
    directives: 'django-modules',
  },
  'matplotlib/matplotlib': { parser: 'matplotlib', cmd: () => PYTEST },
  'mwaskom/seaborn': { parser: 'seaborn', cmd: () => SEABORN },
  'pallets/flask': { parser: 'pytest', cmd: () => PYTEST },
  'psf/requests': { parser: 'pytest-options', cmd: () => PYTEST },
  'pydata/xarray': { parser: 'pytest', cmd: () => PYTEST },
  'pylint-dev/pylint': { parser: 'pytest-options', cmd: () => PYTEST },
  'pytest-dev/pytest': { parser: 'pytest', cmd: () => PYTEST },
  'scikit-learn/scikit-learn': { parser: 'pytest', cmd: () => PYTEST },
  'sphinx-doc/sphinx': { parser: 'pytest', cmd: () => SPHINX },
  'sympy/sympy': { parser: 'sympy', cmd: () => SYMPY },
};

/** Files a unified diff touches (the `b/` side; `a/` for deletions). */
export function diffFiles(patch: string): string[] {
  const files: string[] = [];
  for (const match of patch.matchAll(/^diff --git a\/(\S+) b\/(\S+)$/gm)) {
    const file = match[2] === '/dev/null' ? match[1]! : match[2]!;
    if (!files.includes(file)) files.push(file);
  }
  return files;
}

const NON_TEST_EXT = /\.(json|txt|rst|md|cfg|toml|ini|yml|yaml|csv|dat|png|svg|html|xml)$/i;

/** The test files of a test_patch as arguments to the test command (swebench get_test_directives). */
export function testDirectives(testPatch: string, mode: TestSpec['directives']): string[] {
  if (mode === 'none') return [];
  const files = diffFiles(testPatch).filter((f) => !NON_TEST_EXT.test(f));
  if (mode === 'django-modules') {
    return files.map((f) =>
      f
        .replace(/^tests\//, '')
        .replace(/\.py$/, '')
        .replaceAll('/', '.'),
    );
  }
  return files;
}

function guessParser(cmd: string): string {
  if (/node\s+(--\S+\s+)*--test\b/.test(cmd)) return 'node-test';
  if (cmd.includes('runtests.py')) return 'django';
  if (cmd.includes('bin/test')) return 'sympy';
  return 'pytest';
}

/** The spec for one instance, or a reason it has none. */
export function specFor(instance: SweInstance): TestSpec | { error: string } {
  const named = instance.log_parser ? resolveParserName(instance.log_parser) : null;
  if (instance.log_parser && named === null) return { error: `unknown log_parser "${instance.log_parser}"` };
  if (instance.test_cmd) {
    return {
      testCmd: instance.test_cmd,
      parser: named ?? guessParser(instance.test_cmd),
      directives: 'paths',
    };
  }
  const repo = REPO_SPECS[instance.repo];
  if (repo) {
    return {
      testCmd: repo.cmd(instance.version ?? ''),
      parser: named ?? repo.parser,
      directives: repo.directives ?? 'paths',
    };
  }
  return {
    error: `no test command for repository ${instance.repo}: give the row a test_cmd (and log_parser) field or an eval_script`,
  };
}
