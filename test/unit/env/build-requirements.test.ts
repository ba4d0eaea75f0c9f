/**
 * The build requirements polar fetches into an environment's wheelhouse, read from the shapes real
 * repositories have at SWE-bench Verified base commits: pytest-dev/pytest at e6e300e7 (pytest-7432: a
 * multi-line `requires` with a comment, and setup.cfg `setup_requires`), pallets/flask at 7ee9ceb7
 * (flask-5014: one line, setuptools.build_meta), psf/requests at 22623bd8 and sympy/sympy at cffd4e0f
 * (setup.py only, no pyproject.toml); and the words an install that failed for want of one gets.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  buildSystem,
  setupCfgRequires,
  setupPyRequires,
  treeBuildRequirements,
} from '../../../src/rollout/env/build-requirements.ts';
import { installCause } from '../../../src/rollout/env/layer.ts';

// pytest-dev/pytest e6e300e729dd33956e5448d8be9a0b1540b4e53a:pyproject.toml (head)
const PYTEST_PYPROJECT = `[build-system]
requires = [
  # sync with setup.py until we discard non-pep-517/518
  "setuptools>=40.0",
  "setuptools-scm",
  "wheel",
]
build-backend = "setuptools.build_meta"

[tool.pytest.ini_options]
minversion = "2.0"
`;
// its setup.cfg [options]
const PYTEST_SETUP_CFG = `[metadata]
name = pytest

[options]
zip_safe = no
setup_requires =
    setuptools>=40.0
    setuptools-scm
python_requires = >=3.5

[options.entry_points]
console_scripts =
    pytest=pytest:console_main
`;
// pallets/flask 7ee9ceb71e868944a46e1ff00b506772a53a4f1d:pyproject.toml (its [build-system] and after)
const FLASK_PYPROJECT = `[project]
name = "Flask"
dependencies = [
    "Werkzeug>=2.2.2",
]

[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[tool.setuptools.dynamic]
version = {attr = "flask.__version__"}
`;

test('[build-system] requires, as pip reads it: multi-line arrays with comments, one-line arrays, literal strings; other tables left alone', () => {
  assert.deepEqual(buildSystem(PYTEST_PYPROJECT), {
    requires: ['setuptools>=40.0', 'setuptools-scm', 'wheel'],
    backend: 'setuptools.build_meta',
  });
  assert.deepEqual(buildSystem(FLASK_PYPROJECT), {
    requires: ['setuptools'],
    backend: 'setuptools.build_meta',
  });
  assert.deepEqual(
    buildSystem(
      `[build-system]\nrequires = ['flit_core >=3.2,<4']  # pinned\nbuild-backend = 'flit_core.buildapi'\n`,
    ),
    {
      requires: ['flit_core >=3.2,<4'],
      backend: 'flit_core.buildapi',
    },
  );
  assert.deepEqual(
    buildSystem('[build-system]\nrequires = []\nbuild-backend = "b"\nbackend-path = ["_build"]\n'),
    {
      requires: [],
      backend: 'b',
    },
  );
  assert.equal(buildSystem('[tool.black]\nline-length = 88\n'), null);
  assert.deepEqual(buildSystem('[build-system]\nbuild-backend = "x"\n'), { requires: null, backend: 'x' });
});

test('setup_requires: a dangling list in setup.cfg [options], a literal list in setup.py', () => {
  assert.deepEqual(setupCfgRequires(PYTEST_SETUP_CFG), ['setuptools>=40.0', 'setuptools-scm']);
  assert.deepEqual(setupCfgRequires('[options]\nsetup_requires = cython; numpy>=1.16\n'), [
    'cython',
    'numpy>=1.16',
  ]);
  assert.deepEqual(setupCfgRequires('[metadata]\nsetup_requires = x\n'), []);
  assert.deepEqual(
    setupPyRequires('setup(\n    name="x",\n    setup_requires=["setuptools-scm", \'wheel\'],  # build\n)\n'),
    ['setuptools-scm', 'wheel'],
  );
  assert.deepEqual(setupPyRequires('setup(setup_requires=REQUIRES)'), []);
});

test("a tree's build requirements: [build-system] (and wheel for a setuptools backend), pip's default for a bare setup.py, setup_requires; nothing for an in-tree backend", () => {
  assert.deepEqual(
    treeBuildRequirements({
      pyproject: PYTEST_PYPROJECT,
      setupCfg: PYTEST_SETUP_CFG,
      setupPy: 'from setuptools import setup\nsetup()\n',
    }),
    {
      requirements: ['setuptools>=40.0', 'setuptools-scm', 'wheel'],
      from: ['pyproject.toml [build-system] requires'],
    },
  );
  assert.deepEqual(treeBuildRequirements({ pyproject: FLASK_PYPROJECT, setupCfg: null, setupPy: null }), {
    requirements: ['setuptools', 'wheel'],
    from: ['pyproject.toml [build-system] requires', "setuptools' get_requires_for_build_wheel"],
  });
  // requests 1.1, sympy 1.7: setup.py only
  assert.deepEqual(
    treeBuildRequirements({ pyproject: null, setupCfg: null, setupPy: 'setup(name="requests")' }),
    {
      requirements: ['setuptools>=40.8.0', 'wheel'],
      from: ["pip's default for a setup.py project"],
    },
  );
  assert.deepEqual(
    treeBuildRequirements({
      pyproject: '[build-system]\nrequires = []\nbuild-backend = "b"\nbackend-path = ["_build"]\n',
      setupCfg: null,
      setupPy: null,
    }),
    { requirements: [], from: [] },
  );
  assert.deepEqual(
    treeBuildRequirements({
      pyproject:
        '[build-system]\nrequires = ["polar-fixture-backend==1.0"]\nbuild-backend = "polar_fixture_backend"\n',
      setupCfg: null,
      setupPy: null,
    }),
    { requirements: ['polar-fixture-backend==1.0'], from: ['pyproject.toml [build-system] requires'] },
  );
});

test("an install that failed for want of a build requirement is named by pip's own line, and as a build requirement", () => {
  // pip 23.2's output in a sandbox without the wheelhouse (pallets__flask-5014, before polar fetched them)
  const output = `Obtaining file:///testbed
  Installing build dependencies: started
  Installing build dependencies: finished with status 'error'
  error: subprocess-exited-with-error

  × pip subprocess to install build dependencies did not run successfully.
  │ exit code: 1
  ╰─> [3 lines of output]
      ERROR: Could not find a version that satisfies the requirement setuptools (from versions: none)
      ERROR: No matching distribution found for setuptools
      [end of output]
`;
  // (the tree's build requirements, as polar read them: flask's [build-system] requires, and wheel)
  assert.match(
    String(installCause(output, ['setuptools', 'wheel'])),
    /^a build requirement is missing: pip cannot install setuptools \(versions it can find: none\)/,
  );
  assert.equal(
    installCause('ERROR: No matching distribution found for Werkzeug>=2.2.2\n', ['Werkzeug>=2.2.2']),
    'pip cannot install Werkzeug>=2.2.2 (versions it can find: none)',
  );
  // what polar did not ask for is not repeated (issue 43: pip's words can carry a line of a file it read)
  assert.match(
    String(installCause(output, ['wheel'])),
    /^a build requirement is missing: pip cannot install a dependency of the requirements \(the build log names it\)/,
  );
  assert.equal(installCause('+ python setup.py develop\nTraceback...\nSystemExit: 1\n'), null);
});
