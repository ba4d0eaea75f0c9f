/**
 * The environment half of the official specs: per repository and version, the Python version, the
 * packages of the environment (`packages`: a conda package list, or `requirements.txt` /
 * `environment.yml` read from the repository), `pip_packages`, the `pre_install` steps and the
 * `install` step. Values follow SWE-bench/SWE-bench tag v4.1.0, swebench/harness/constants/python.py
 * (MAP_REPO_VERSION_TO_SPECS_PY, MAP_REPO_TO_REQS_PATHS, MAP_REPO_TO_ENV_YML_PATHS), for the 12
 * SWE-bench Verified repositories; test_spec/python.py (make_env_script_list_py,
 * make_repo_script_list_py, get_requirements_by_commit) says how they are used. The test command and
 * eval_commands are in src/rollout/specs.ts.
 */

export interface OfficialEnv {
  python: string;
  /** conda packages (space separated, shell quoting), 'requirements.txt' or 'environment.yml' */
  packages?: string;
  pip_packages?: string[];
  pre_install?: string[];
  install: string;
}

const words = (text: string) => text.split(' ');
const has = (list: string, version: string) => list.split(' ').includes(version);
const PIP_E = 'python -m pip install -e .';

// astropy: the 3.0-v5.3 pins and the 0.1-1.3 pins
const ASTROPY_PINS = words(
  'attrs==23.1.0 exceptiongroup==1.1.3 execnet==2.0.2 hypothesis==6.82.6 iniconfig==2.0.0 numpy==1.25.2 packaging==23.1 pluggy==1.3.0 psutil==5.9.5 pyerfa==2.0.0.3 pytest-arraydiff==0.5.0 pytest-astropy-header==0.2.2 pytest-astropy==0.10.0 pytest-cov==4.1.0 pytest-doctestplus==1.0.0 pytest-filter-subpackage==0.1.2 pytest-mock==3.11.1 pytest-openfiles==0.5.0 pytest-remotedata==0.4.0 pytest-xdist==3.3.1 pytest==7.4.0 PyYAML==6.0.1 setuptools==68.0.0 sortedcontainers==2.4.0 tomli==2.0.1',
);
const ASTROPY_OLD_PINS = words(
  'attrs==17.3.0 exceptiongroup==0.0.0a0 execnet==1.5.0 hypothesis==3.44.2 cython==0.27.3 jinja2==2.10 MarkupSafe==1.0 numpy==1.16.0 packaging==16.8 pluggy==0.6.0 psutil==5.4.2 pyerfa==1.7.0 pytest-arraydiff==0.1 pytest-astropy-header==0.1 pytest-astropy==0.2.1 pytest-cov==2.5.1 pytest-doctestplus==0.1.2 pytest-filter-subpackage==0.1 pytest-forked==0.2 pytest-mock==1.6.3 pytest-openfiles==0.2.0 pytest-remotedata==0.2.0 pytest-xdist==1.20.1 pytest==3.3.1 PyYAML==3.12 sortedcontainers==1.5.9 tomli==0.2.0',
);
const ASTROPY_SED = `sed -i 's/requires = \\["setuptools",/requires = \\["setuptools==68.0.0",/' pyproject.toml`;

const DJANGO_LOCALE = [
  'apt-get update && apt-get install -y locales',
  "echo 'en_US UTF-8' > /etc/locale.gen",
  'locale-gen en_US.UTF-8',
];

const QHULL = [
  'QHULL_URL="http://www.qhull.org/download/qhull-2020-src-8.0.2.tgz"',
  'QHULL_TAR="/tmp/qhull-2020-src-8.0.2.tgz"',
  'QHULL_BUILD_DIR="/testbed/build"',
  'wget -O "$QHULL_TAR" "$QHULL_URL"',
  'mkdir -p "$QHULL_BUILD_DIR"',
  'tar -xvzf "$QHULL_TAR" -C "$QHULL_BUILD_DIR"',
];
const TEXLIVE = 'texlive texlive-latex-extra texlive-fonts-recommended texlive-xetex texlive-luatex cm-super';
const MPL_PINS = words(
  'contourpy==1.1.0 cycler==0.11.0 fonttools==4.42.1 ghostscript kiwisolver==1.4.5 numpy==1.25.2 packaging==23.1 pillow==10.0.0 pikepdf pyparsing==3.0.9 python-dateutil==2.8.2 six==1.16.0 setuptools==68.1.2 setuptools-scm==7.1.0 typing-extensions==4.7.1',
);

const seabornPins = (pandas: string) =>
  words(
    `contourpy==1.1.0 cycler==0.11.0 fonttools==4.42.1 importlib-resources==6.0.1 kiwisolver==1.4.5 matplotlib==3.7.2 numpy==1.25.2 packaging==23.1 pandas==${pandas} pillow==10.0.0 pyparsing==3.0.9 pytest python-dateutil==2.8.2 pytz==2023.3.post1 scipy==1.11.2 six==1.16.0 tzdata==2023.1 zipp==3.16.2`,
  );

const FLASK_PINS = words(
  'setuptools==70.0.0 click==8.1.3 itsdangerous==2.1.2 Jinja2==3.1.2 MarkupSafe==2.1.1 Werkzeug==2.3.7',
);

/** pytest's pip_packages per version (SPECS_PYTEST[k]["pip_packages"]) */
function pytestPins(v: string): string[] {
  if (v === '4.4')
    return words(
      'atomicwrites==1.4.1 attrs==23.1.0 more-itertools==10.1.0 pluggy==0.13.1 py==1.11.0 setuptools==68.0.0 six==1.16.0',
    );
  if (v === '4.5')
    return words(
      'atomicwrites==1.4.1 attrs==23.1.0 more-itertools==10.1.0 pluggy==0.11.0 py==1.11.0 setuptools==68.0.0 six==1.16.0 wcwidth==0.2.6',
    );
  if (v === '4.6')
    return words(
      'atomicwrites==1.4.1 attrs==23.1.0 more-itertools==10.1.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 six==1.16.0 wcwidth==0.2.6',
    );
  if (has('5.0 5.1 5.2', v))
    return words(
      'atomicwrites==1.4.1 attrs==23.1.0 more-itertools==10.1.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 wcwidth==0.2.6',
    );
  if (v === '5.3')
    return words(
      'attrs==23.1.0 more-itertools==10.1.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 wcwidth==0.2.6',
    );
  if (v === '5.4')
    return words('py==1.11.0 packaging==23.1 attrs==23.1.0 more-itertools==10.1.0 pluggy==0.13.1');
  if (v === '6.0')
    return words(
      'attrs==23.1.0 iniconfig==2.0.0 more-itertools==10.1.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 toml==0.10.2',
    );
  if (has('6.2 6.3', v))
    return words('attrs==23.1.0 iniconfig==2.0.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 toml==0.10.2');
  if (v === '7.0') return words('attrs==23.1.0 iniconfig==2.0.0 packaging==23.1 pluggy==0.13.1 py==1.11.0');
  if (has('7.1 7.2', v))
    return words('attrs==23.1.0 iniconfig==2.0.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 tomli==2.0.1');
  return words('iniconfig==2.0.0 packaging==23.1 pluggy==1.3.0 exceptiongroup==1.1.3 tomli==2.0.1');
}

const SPHINX_PINNED_DEPS = [
  "sed -i 's/Jinja2>=2.3/Jinja2<3.0/' setup.py",
  "sed -i 's/sphinxcontrib-applehelp/sphinxcontrib-applehelp<=1.0.7/' setup.py",
  "sed -i 's/sphinxcontrib-devhelp/sphinxcontrib-devhelp<=1.0.5/' setup.py",
  "sed -i 's/sphinxcontrib-qthelp/sphinxcontrib-qthelp<=1.0.6/' setup.py",
  "sed -i 's/alabaster>=0.7,<0.8/alabaster>=0.7,<0.7.12/' setup.py",
  `sed -i "s/'packaging',/'packaging', 'markupsafe<=2.0.1',/" setup.py`,
];
const HTMLHELP = 'sphinxcontrib-htmlhelp';
const SERIALIZING = 'sphinxcontrib-serializinghtml';

/** sphinx's pre_install per version (the SPECS_SPHINX loops) */
function sphinxPreInstall(v: string): string[] {
  const steps = ["sed -i 's/pytest/pytest -rA/' tox.ini"];
  if (has('3.0 3.1 3.2 3.3 3.4 3.5 4.0 4.1 4.2 4.3 4.4', v)) {
    steps.push(...SPHINX_PINNED_DEPS);
    if (has('4.2 4.3 4.4', v)) {
      steps.push(
        `sed -i 's/${HTMLHELP}>=2.0.0/${HTMLHELP}>=2.0.0,<=2.0.4/' setup.py`,
        `sed -i 's/${SERIALIZING}>=1.1.5/${SERIALIZING}>=1.1.5,<=1.1.9/' setup.py`,
      );
    } else if (v === '4.1') {
      steps.push(
        `grep -q '${HTMLHELP}>=2.0.0' setup.py && sed -i 's/${HTMLHELP}>=2.0.0/${HTMLHELP}>=2.0.0,<=2.0.4/' setup.py || sed -i 's/${HTMLHELP}/${HTMLHELP}<=2.0.4/' setup.py`,
        `grep -q '${SERIALIZING}>=1.1.5' setup.py && sed -i 's/${SERIALIZING}>=1.1.5/${SERIALIZING}>=1.1.5,<=1.1.9/' setup.py || sed -i 's/${SERIALIZING}/${SERIALIZING}<=1.1.9/' setup.py`,
      );
    } else {
      steps.push(
        `sed -i 's/${HTMLHELP}/${HTMLHELP}<=2.0.4/' setup.py`,
        `sed -i 's/${SERIALIZING}/${SERIALIZING}<=1.1.9/' setup.py`,
      );
    }
  }
  if (has('7.2 7.3 7.4 8.0 8.1', v)) steps.push('apt-get update && apt-get install -y graphviz');
  return steps;
}

type Table = { versions: string; env: (version: string) => OfficialEnv };

const TABLES: Record<string, Table> = {
  'astropy/astropy': {
    versions: '0.1 0.2 0.3 0.4 1.1 1.2 1.3 3.0 3.1 3.2 4.1 4.2 4.3 5.0 5.1 5.2 v5.3',
    env: (v) => {
      const install = 'python -m pip install -e .[test] --verbose';
      if (has('0.1 0.2 0.3 0.4 1.1 1.2 1.3', v))
        return { python: '3.6', packages: 'setuptools==38.2.4', pip_packages: ASTROPY_OLD_PINS, install };
      return {
        python: v === 'v5.3' ? '3.10' : '3.9',
        pip_packages: ASTROPY_PINS,
        ...(has('3.0 3.1 3.2', v) ? {} : { pre_install: [ASTROPY_SED] }),
        install,
      };
    },
  },
  'django/django': {
    versions: '1.4 1.5 1.6 1.7 1.8 1.9 1.10 1.11 2.0 2.1 2.2 3.0 3.1 3.2 4.0 4.1 4.2 5.0 5.1 5.2',
    env: (v) => {
      if (has('1.4 1.5 1.6', v)) return { python: '3.5', install: 'python setup.py install' };
      if (has('1.7 1.8 1.9 1.10 1.11 2.0 2.1 2.2', v))
        return {
          python: '3.5',
          packages: 'requirements.txt',
          pre_install: DJANGO_LOCALE,
          install: 'python setup.py install',
          pip_packages: ['setuptools'],
        };
      const python = has('3.0 3.1 3.2', v) ? '3.6' : v === '4.0' ? '3.8' : has('4.1 4.2', v) ? '3.9' : '3.11';
      return { python, packages: 'requirements.txt', install: PIP_E };
    },
  },
  'matplotlib/matplotlib': {
    versions: '1.0 1.1 1.2 1.3 1.4 1.5 2.0 2.1 2.2 3.0 3.1 3.2 3.3 3.4 3.5 3.6 3.7 3.8 3.9',
    env: (v) => {
      if (has('3.5 3.6 3.7 3.8 3.9', v))
        return {
          python: '3.11',
          packages: 'environment.yml',
          install: has('3.8 3.9', v) ? 'python -m pip install --no-build-isolation -e ".[dev]"' : PIP_E,
          pre_install: [
            `apt-get -y update && apt-get -y upgrade && DEBIAN_FRONTEND=noninteractive apt-get install -y imagemagick ffmpeg ${TEXLIVE} dvipng`,
            ...QHULL,
          ],
          pip_packages: MPL_PINS,
        };
      if (has('3.1 3.2 3.3 3.4', v))
        return {
          python: '3.8',
          packages: 'requirements.txt',
          install: PIP_E,
          pre_install: [
            `apt-get -y update && apt-get -y upgrade && DEBIAN_FRONTEND=noninteractive apt-get install -y imagemagick ffmpeg libfreetype6-dev pkg-config ${TEXLIVE}`,
            ...QHULL,
          ],
          pip_packages: ['pytest', 'ipython'],
        };
      if (v === '3.0')
        return {
          python: '3.7',
          packages: 'requirements.txt',
          install: PIP_E,
          pre_install: [
            'apt-get -y update && apt-get -y upgrade && apt-get install -y imagemagick ffmpeg libfreetype6-dev pkg-config',
            ...QHULL,
          ],
          pip_packages: ['pytest'],
        };
      return {
        python: '3.5',
        install: 'python setup.py build; python setup.py install',
        // (the official line has the doubled "&& &&" as written)
        pre_install: ['apt-get -y update && apt-get -y upgrade && && apt-get install -y imagemagick ffmpeg'],
        pip_packages: ['pytest'],
      };
    },
  },
  'mwaskom/seaborn': {
    versions: '0.11 0.12 0.13 0.14',
    env: (v) =>
      v === '0.11'
        ? { python: '3.9', install: PIP_E, pip_packages: seabornPins('1.3.5') }
        : { python: '3.9', install: 'python -m pip install -e .[dev]', pip_packages: seabornPins('2.0.0') },
  },
  'pallets/flask': {
    versions: '2.0 2.1 2.2 2.3 3.0 3.1',
    env: (v) => ({
      python: v === '2.0' ? '3.9' : v === '2.1' ? '3.10' : '3.11',
      packages: 'requirements.txt',
      install: PIP_E,
      pip_packages:
        v === '2.0'
          ? words(
              'setuptools==70.0.0 Werkzeug==2.3.7 Jinja2==3.0.1 itsdangerous==2.1.2 click==8.0.1 MarkupSafe==2.1.3',
            )
          : FLASK_PINS,
    }),
  },
  'psf/requests': {
    versions:
      '0.7 0.8 0.9 0.11 0.13 0.14 1.1 1.2 2.0 2.2 2.3 2.4 2.5 2.7 2.8 2.9 2.10 2.11 2.12 2.17 2.18 2.19 2.22 2.26 2.25 2.27 2.31 3.0',
    env: () => ({ python: '3.9', packages: 'pytest', install: 'python -m pip install .' }),
  },
  'pydata/xarray': {
    versions: '0.12 0.18 0.19 0.20 2022.03 2022.06 2022.09 2023.07 2024.05',
    env: () => ({
      python: '3.10',
      packages: 'environment.yml',
      install: PIP_E,
      pip_packages: words(
        'numpy==1.23.0 packaging==23.1 pandas==1.5.3 pytest==7.4.0 python-dateutil==2.8.2 pytz==2023.3 six==1.16.0 scipy==1.11.1 setuptools==68.0.0 dask==2022.8.1',
      ),
    }),
  },
  'pylint-dev/pylint': {
    versions: '2.8 2.9 2.10 2.11 2.13 2.14 2.15 2.16 2.17 3.0 3.1 3.2 3.3 4.0',
    env: (v) => ({
      python: '3.9',
      packages: 'requirements.txt',
      install: PIP_E,
      ...(v === '2.8'
        ? {
            pip_packages: ['pyenchant==3.2'],
            pre_install: ['apt-get update && apt-get install -y libenchant-2-dev hunspell-en-us'],
          }
        : has('3.0 3.1 3.2 3.3 4.0', v)
          ? { pip_packages: ['astroid==3.0.0a6', 'setuptools'] }
          : {}),
    }),
  },
  'pytest-dev/pytest': {
    versions: '4.4 4.5 4.6 5.0 5.1 5.2 5.3 5.4 6.0 6.2 6.3 7.0 7.1 7.2 7.4 8.0 8.1 8.2 8.3 8.4',
    env: (v) => ({
      python: '3.9',
      install: PIP_E,
      pip_packages: pytestPins(v),
      ...(v === '6.3' ? { pre_install: ["sed -i 's/>=>=/>=/' setup.cfg"] } : {}),
    }),
  },
  'scikit-learn/scikit-learn': {
    versions: '0.20 0.21 0.22 1.3 1.4 1.5 1.6',
    env: (v) => ({
      install: 'python -m pip install -v --no-use-pep517 --no-build-isolation -e .',
      ...(has('0.20 0.21 0.22', v)
        ? {
            python: '3.6',
            packages: 'numpy scipy cython pytest pandas matplotlib',
            pip_packages: words('cython numpy==1.19.2 setuptools scipy==1.5.2'),
          }
        : {
            python: '3.9',
            packages:
              "'numpy==1.19.2' 'scipy==1.5.2' 'cython==3.0.10' pytest 'pandas<2.0.0' 'matplotlib<3.9.0' setuptools pytest joblib threadpoolctl",
            pip_packages: words('cython setuptools numpy scipy'),
          }),
    }),
  },
  'sphinx-doc/sphinx': {
    versions:
      '1.5 1.6 1.7 1.8 2.0 2.1 2.2 2.3 2.4 3.0 3.1 3.2 3.3 3.4 3.5 4.0 4.1 4.2 4.3 4.4 4.5 5.0 5.1 5.2 5.3 6.0 6.2 7.0 7.1 7.2 7.3 7.4 8.0 8.1',
    env: (v) => ({
      python: has('8.0 8.1', v) ? '3.10' : '3.9',
      pip_packages: words('tox==4.16.0 tox-current-env==0.0.11 Jinja2==3.0.3'),
      install: 'python -m pip install -e .[test]',
      pre_install: sphinxPreInstall(v),
    }),
  },
  'sympy/sympy': {
    versions: '0.7 1.0 1.1 1.2 1.4 1.5 1.6 1.7 1.8 1.9 1.10 1.11 1.12 1.13 1.14',
    env: (v) =>
      has('1.13 1.14', v)
        ? { python: '3.9', packages: 'requirements.txt', install: PIP_E, pip_packages: ['mpmath==1.3.0'] }
        : {
            python: '3.9',
            packages: 'mpmath flake8',
            install: PIP_E,
            pip_packages: ['mpmath==1.3.0', 'flake8-comprehensions'],
          },
  },
};

/** MAP_REPO_TO_REQS_PATHS (v4.1.0): where `packages: requirements.txt` is read, first found wins */
export const REQUIREMENTS_PATHS: Record<string, string[]> = {
  'django/django': ['tests/requirements/py3.txt'],
  'matplotlib/matplotlib': ['requirements/dev/dev-requirements.txt', 'requirements/testing/travis_all.txt'],
  'pallets/flask': ['requirements/dev.txt'],
  'pylint-dev/pylint': ['requirements_test.txt'],
  'sympy/sympy': ['requirements-dev.txt', 'requirements-test.txt'],
};

/** MAP_REPO_TO_ENV_YML_PATHS (v4.1.0): where `packages: environment.yml` is read */
export const ENV_YML_PATHS: Record<string, string[]> = {
  'matplotlib/matplotlib': ['environment.yml'],
  'pydata/xarray': ['ci/requirements/environment.yml', 'environment.yml'],
};

/** The official environment spec of a repository at a version, or null when v4.1.0 has none. */
export function officialEnv(repo: string, version: string): OfficialEnv | null {
  const table = TABLES[repo];
  if (!table || !has(table.versions, version)) return null;
  return table.env(version);
}

/** The repositories and versions the table covers (tests compare them with the official table). */
export function officialEnvVersions(): Record<string, string[]> {
  return Object.fromEntries(Object.entries(TABLES).map(([repo, t]) => [repo, t.versions.split(' ')]));
}
