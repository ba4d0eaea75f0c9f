/**
 * How each repository is tested: the test command, the log parser, how the test files of a
 * test_patch become arguments, and the environment set-up the official eval script runs before the
 * tests. Values follow SWE-bench/SWE-bench tag v4.1.0: swebench/harness/constants/python.py
 * (MAP_REPO_VERSION_TO_SPECS_PY: test_cmd and eval_commands per version; the environment's fields,
 * install included, are in src/rollout/env/official.ts),
 * harness/log_parsers/python.py (MAP_REPO_TO_PARSER_PY), test_spec/python.py (get_test_directives,
 * make_eval_script_list_py) and constants/__init__.py (NON_TEST_EXTS), for the 12 SWE-bench Verified
 * repositories; other datasets name `test_cmd` (and `log_parser`) per row, or bring a 5.x eval_script.
 */

import type { SweInstance } from './dataset.ts';
import { officialEnv } from './env/official.ts';
import { resolveParserName } from './log-parsers/index.ts';

/** What the official eval script runs before the tests (make_eval_script_list_py, v4.1.0). */
export interface EnvSetup {
  /** the spec's eval_commands (Django 1.7-3.2: locale and LANG / LC_ALL) */
  evalCommands: string[];
  /** the spec's install, run again before every test run (rebuilds C extensions, reinstalls old Django) */
  install: string | null;
}

export interface TestSpec {
  /** shell command the test files are appended to */
  testCmd: string;
  /** log parser name (see log-parsers/index.ts) */
  parser: string;
  /** how test_patch files become arguments */
  directives: 'paths' | 'django-modules' | 'none';
  setup: EnvSetup;
}

// constants/python.py (v4.1.0): TEST_PYTEST is defined twice; the second, "pytest -rA", is in force
const PYTEST = 'pytest -rA';
const ASTROPY_OLD = 'pytest -rA -vv -o console_output_style=classic --tb=no';
const DJANGO = './tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1';
const DJANGO_NO_PARALLEL = './tests/runtests.py --verbosity 2';
const SEABORN = 'pytest --no-header -rA';
const SPHINX = 'tox --current-env -epy39 -v --';
const SYMPY = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose";

const DJANGO_LOCALE = [
  'export LANG=en_US.UTF-8',
  'export LC_ALL=en_US.UTF-8',
  'export PYTHONIOENCODING=utf8',
  'export LANGUAGE=en_US:en',
];
const DJANGO_LOCALE_3 = [
  "sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen",
  'export LANG=en_US.UTF-8',
  'export LANGUAGE=en_US:en',
  'export LC_ALL=en_US.UTF-8',
];

interface VersionSpec {
  cmd: string;
  evalCommands?: string[];
}

interface RepoSpec {
  parser: string;
  spec: (version: string) => VersionSpec;
  directives?: TestSpec['directives'];
}

const has = (list: string, version: string) => list.split(' ').includes(version);

export const REPO_SPECS: Record<string, RepoSpec> = {
  // 10 versions (3.0-v5.3) run plain pytest -rA; 0.1-1.3 the verbose classic console
  'astropy/astropy': {
    parser: 'pytest-v2',
    spec: (v) => ({ cmd: has('0.1 0.2 0.3 0.4 1.1 1.2 1.3', v) ? ASTROPY_OLD : PYTEST }),
  },
  'django/django': {
    parser: 'django',
    directives: 'django-modules',
    spec: (v) => ({
      cmd: v === '1.9' ? DJANGO_NO_PARALLEL : DJANGO,
      evalCommands: has('1.7 1.8 1.9 1.10 1.11 2.0 2.1 2.2', v)
        ? DJANGO_LOCALE
        : has('3.0 3.1 3.2', v)
          ? DJANGO_LOCALE_3
          : [],
    }),
  },
  'matplotlib/matplotlib': { parser: 'matplotlib', spec: () => ({ cmd: PYTEST }) },
  'mwaskom/seaborn': { parser: 'seaborn', spec: () => ({ cmd: SEABORN }) },
  'pallets/flask': { parser: 'pytest', spec: () => ({ cmd: PYTEST }) },
  'psf/requests': { parser: 'pytest-options', spec: () => ({ cmd: PYTEST }) },
  'pydata/xarray': { parser: 'pytest', spec: () => ({ cmd: PYTEST }) },
  'pylint-dev/pylint': { parser: 'pytest-options', spec: () => ({ cmd: PYTEST }) },
  'pytest-dev/pytest': { parser: 'pytest', spec: () => ({ cmd: PYTEST }) },
  'scikit-learn/scikit-learn': { parser: 'pytest-v2', spec: () => ({ cmd: PYTEST }) },
  'sphinx-doc/sphinx': {
    parser: 'pytest-v2',
    spec: () => ({ cmd: SPHINX }),
  },
  'sympy/sympy': { parser: 'sympy', spec: () => ({ cmd: SYMPY }) },
};

/**
 * Files a unified diff touches, as the official `re.findall(r"diff --git a/.* b/(.*)", test_patch)`
 * reads them: the text after the last ` b/` of the line. A path with spaces is whole, unless one of
 * its directories ends in ` b` (`a b/test c.py` gives `test c.py`, officially too).
 */
export function diffFiles(patch: string): string[] {
  const files: string[] = [];
  for (const match of patch.matchAll(/diff --git a\/[^\n]* b\/([^\n]*)/g)) {
    if (!files.includes(match[1]!)) files.push(match[1]!);
  }
  return files;
}

/** constants/__init__.py NON_TEST_EXTS (v4.1.0 and v5.0.1), matched with endswith: "csv" has no dot */
export const NON_TEST_EXTS = [
  '.json',
  '.png',
  'csv',
  '.txt',
  '.md',
  '.jpg',
  '.jpeg',
  '.pkl',
  '.yml',
  '.yaml',
  '.toml',
];

/** The test files of a test_patch as arguments to the test command (get_test_directives). */
export function testDirectives(testPatch: string, mode: TestSpec['directives']): string[] {
  if (mode === 'none') return [];
  const files = diffFiles(testPatch).filter((f) => !NON_TEST_EXTS.some((ext) => f.endsWith(ext)));
  if (mode === 'django-modules') {
    return files.map((f) => {
      let d = f.endsWith('.py') ? f.slice(0, -3) : f;
      if (d.startsWith('tests/')) d = d.slice('tests/'.length);
      return d.replaceAll('/', '.');
    });
  }
  return files;
}

function guessParser(cmd: string): string {
  if (/node\s+(--\S+\s+)*--test\b/.test(cmd)) return 'node-test';
  if (cmd.includes('runtests.py')) return 'django';
  if (cmd.includes('bin/test')) return 'sympy';
  return 'pytest';
}

const NO_SETUP: EnvSetup = { evalCommands: [], install: null };

/** The spec for one instance, or a reason it has none. */
export function specFor(instance: SweInstance): TestSpec | { error: string } {
  const named = instance.log_parser ? resolveParserName(instance.log_parser) : null;
  if (instance.log_parser && named === null) return { error: `unknown log_parser "${instance.log_parser}"` };
  if (instance.test_cmd) {
    return {
      testCmd: instance.test_cmd,
      parser: named ?? guessParser(instance.test_cmd),
      directives: 'paths',
      setup: NO_SETUP,
    };
  }
  const repo = REPO_SPECS[instance.repo];
  if (repo) {
    const v = repo.spec(instance.version ?? '');
    return {
      testCmd: v.cmd,
      parser: named ?? repo.parser,
      directives: repo.directives ?? 'paths',
      setup: {
        evalCommands: v.evalCommands ?? [],
        install: officialEnv(instance.repo, instance.version)?.install ?? null,
      },
    };
  }
  return {
    error: `no test command for repository ${instance.repo}: give the row a test_cmd (and log_parser) field or an eval_script`,
  };
}
