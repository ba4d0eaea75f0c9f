/**
 * The import guard: a test run that imports the repository's package from anywhere but the sample's
 * tree (or the layer its install step filled from that tree) is an error naming both paths, never a
 * score. Every environment polar builds carries a startup hook (`_polar_guard.pth` importing
 * `_polar_guard.py`, in the cached site-packages that every layer adds): when POLAR_GUARD_LOG and
 * POLAR_GUARD_TREE are set, it puts a finder first on sys.meta_path that, the first time a top-level
 * package named like a package of the tree (a folder with __init__.py at its root, in src/ or in lib/)
 * is found, appends `name<TAB>origin` to the log. It records at import time, so a run cut short still
 * leaves its records, and it never changes what is imported. The hook is Python 3.5-compatible (the
 * oldest Python of the official specs).
 */
import { shellWords } from './conda.ts';
import type { GuardViolation } from './types.ts';

export const GUARD_MODULE = '_polar_guard';

export const GUARD_HOOK = `# polar's import guard (src/env/guard.ts): inert unless POLAR_GUARD_LOG and POLAR_GUARD_TREE are set
import os
import sys


def _tree_packages(tree):
    names = set()
    for sub in ("", "src", "lib"):
        base = os.path.join(tree, sub)
        try:
            entries = os.listdir(base)
        except OSError:
            continue
        for entry in entries:
            if os.path.isfile(os.path.join(base, entry, "__init__.py")):
                names.add(entry)
    return names


def _install():
    log = os.environ.get("POLAR_GUARD_LOG")
    tree = os.environ.get("POLAR_GUARD_TREE")
    if not log or not tree or any(type(f).__name__ == "PolarGuard" for f in sys.meta_path):
        return
    names = _tree_packages(tree)
    if not names:
        return

    class PolarGuard(object):
        seen = set()

        def find_spec(self, name, path=None, target=None):
            if path is not None or name not in names or name in self.seen:
                return None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                try:
                    spec = find(name, None, target)
                except Exception:
                    continue
                if spec is None:
                    continue
                self.seen.add(name)
                origin = spec.origin
                if origin in (None, "namespace"):
                    origin = ";".join(spec.submodule_search_locations or [])
                elif os.path.isabs(origin):
                    origin = os.path.realpath(origin)
                try:
                    with open(log, "a") as f:
                        f.write("%s\\t%s\\n" % (name, origin))
                except OSError:
                    pass
                break
            return None

    sys.meta_path.insert(0, PolarGuard())


_install()
`;

/** the .pth line that loads the hook at every interpreter start */
export const GUARD_PTH = `import ${GUARD_MODULE}\n`;

const NAMES_MARK = '@@polar-guard-names';
const ROOTS_MARK = '@@polar-guard-roots';
const PROGRAM_MARK = '@@polar-guard-program';

/** The program a test command runs: its first word after `VAR=value` assignments (and `env`). */
export function testProgram(testCmd: string): string | null {
  const words = shellWords(testCmd);
  return words.find((w, i) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w) && !(w === 'env' && i === 0)) ?? null;
}

export interface GuardPlaces {
  log: string;
  tree: string;
  layer: string;
  /** the test command's program, when polar knows the command */
  program: string | null;
}

/**
 * The shell script (run with the sample's PATH, in the tree) that prints the guard's records, the
 * tree's package names, the real roots, and where the test command's program resolves.
 */
export function guardReport(places: GuardPlaces): string {
  const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  const { log, tree, layer, program } = places;
  const resolveProgram =
    program === null
      ? 'true'
      : program.includes('/')
        ? `realpath -m -- ${q(program)}`
        : `command -v -- ${q(program)} || echo '(not found)'`;
  return [
    `cat ${q(log)} 2>/dev/null`,
    `echo ${NAMES_MARK}`,
    `cd ${q(tree)} && for f in ./*/__init__.py src/*/__init__.py lib/*/__init__.py; do [ -f "$f" ] && basename "$(dirname "$f")"; done`,
    `echo ${ROOTS_MARK}`,
    `(cd ${q(tree)} && pwd -P); (cd ${q(layer)} 2>/dev/null && pwd -P || echo ${q(layer)})`,
    `echo ${PROGRAM_MARK}`,
    resolveProgram,
    'true',
  ].join('\n');
}

const inside = (path: string, root: string) => path === root || path.startsWith(`${root}/`);

interface GuardFacts {
  records: Array<{ name: string; origin: string }>;
  names: string[];
  tree: string;
  layer: string;
  program: string | null;
}

function readReport(report: string, places: GuardPlaces): GuardFacts {
  const [recordsText = '', rest = ''] = report.split(`${NAMES_MARK}\n`);
  const [namesText = '', rest2 = ''] = rest.split(`${ROOTS_MARK}\n`);
  const [rootsText = '', programText = ''] = rest2.split(`${PROGRAM_MARK}\n`);
  const [tree = places.tree, layer = places.layer] = rootsText.split('\n').filter(Boolean);
  const records = recordsText
    .split('\n')
    .filter((l) => l.includes('\t'))
    .map((l) => {
      const [name, origin] = l.split('\t') as [string, string];
      return { name, origin };
    });
  const program = places.program === null ? null : (programText.split('\n').find(Boolean) ?? '(not found)');
  return { records, names: [...new Set(namesText.split('\n').filter(Boolean))], tree, layer, program };
}

/**
 * The guard's verdict on a guarded test run, from guardReport's output. A record outside the tree and
 * the layer is a violation. When no Python of the environment recorded an import of the tree's
 * packages, the run is a violation if some test passed (another Python ran the tests, whose imports the
 * hook cannot see) or if the test command's program is not in the environment (a `pytest` found
 * further down PATH imports its own copy: the failure that graded pytest-dev__pytest-7432's gold patch
 * unresolved). `envDir` is the cached environment (its bin/ is on PATH after the layer's).
 */
export function judgeGuard(
  report: string,
  context: GuardPlaces & { envDir: string; passed: boolean; install: string | null },
): GuardViolation | null {
  const { records, names, tree, layer, program } = readReport(report, context);
  const installed = context.install ? `the install step (${context.install})` : 'no install step';
  for (const { name, origin } of records) {
    const paths = origin.split(';');
    if (paths.some((p) => !p.startsWith('/') || !(inside(p, tree) || inside(p, layer)))) {
      return {
        message: `the tests imported ${name} from ${origin}, not from the sample's tree ${tree}: an installed copy was tested instead of the patched code (the environment layer ${layer} has ${installed})`,
      };
    }
  }
  if (records.length > 0 || names.length === 0) return null;
  const where = `no Python of the environment imported the tree's ${names.join(', ')} from ${tree}`;
  if (
    program !== null &&
    ![tree, context.tree, layer, context.layer, context.envDir].some((r) => inside(program, r))
  ) {
    return {
      message: `${where}: the test command's ${context.program} is ${program}, outside the environment (layer ${layer}, environment ${context.envDir}; ${installed})`,
    };
  }
  if (context.passed)
    return {
      message: `tests passed, but ${where}: the test command ran a Python outside the environment, whose imports cannot be checked`,
    };
  return null;
}
