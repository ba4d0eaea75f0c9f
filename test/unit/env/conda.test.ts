import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  condaListRequirements,
  condaToPip,
  environmentYmlRequirements,
  shellWords,
} from '../../../src/rollout/env/conda.ts';

test('shellWords splits a conda package list as the shell would (quotes kept together, removed)', () => {
  assert.deepEqual(shellWords(`'numpy==1.19.2' 'pandas<2.0.0' pytest  "a b"`), [
    'numpy==1.19.2',
    'pandas<2.0.0',
    'pytest',
    'a b',
  ]);
  assert.deepEqual(shellWords("''"), ['']);
  assert.deepEqual(shellWords('  '), []);
});

test('condaToPip: conda match specs become pip requirements; the interpreter and C libraries are left out', () => {
  assert.equal(condaToPip('numpy'), 'numpy');
  assert.equal(condaToPip('numpy=1.19'), 'numpy==1.19.*'); // conda: any 1.19.x
  assert.equal(condaToPip('numpy=1.19.2=py36h1234_0'), 'numpy==1.19.2'); // with a build string
  assert.equal(condaToPip('numpy==1.19.2=py36h1234_0'), 'numpy==1.19.2');
  assert.equal(condaToPip('numpy=1.19.*'), 'numpy==1.19.*');
  assert.equal(condaToPip('numpy>=1.20,<2'), 'numpy>=1.20,<2');
  assert.equal(condaToPip('pandas<2.0.0'), 'pandas<2.0.0');
  assert.equal(condaToPip('dask-core'), 'dask');
  assert.equal(condaToPip('matplotlib-base>=3.5'), 'matplotlib>=3.5');
  assert.equal(condaToPip('python=3.10'), null);
  assert.equal(condaToPip('pip'), null);
  assert.equal(condaToPip('libgcc-ng=11.2.0=h1234567_1'), null);
  assert.equal(condaToPip('hdf5'), null);
});

test('a conda package list (the spec of scikit-learn 1.3) as pip requirements', () => {
  const r = condaListRequirements(
    "'numpy==1.19.2' 'scipy==1.5.2' 'cython==3.0.10' pytest 'pandas<2.0.0' 'matplotlib<3.9.0' setuptools pytest joblib threadpoolctl",
  );
  assert.deepEqual(r.requirements, [
    'numpy==1.19.2',
    'scipy==1.5.2',
    'cython==3.0.10',
    'pytest',
    'pandas<2.0.0',
    'matplotlib<3.9.0',
    'setuptools',
    'pytest',
    'joblib',
    'threadpoolctl',
  ]);
  assert.deepEqual(r.skipped, []);
});

test('an environment.yml: conda dependencies translated, its pip: list taken as it is, comments dropped', () => {
  const yml = [
    'name: xarray-tests',
    'channels:',
    '  - conda-forge',
    '  - nodefaults',
    'dependencies:',
    '  - python=3.10  # the interpreter',
    '  - boto3',
    '  - dask-core',
    '  - hdf5',
    '  - numpy>=1.23',
    '  - pip',
    '  - pip:',
    '      - numbagg',
    '      - "types-pkg_resources"',
    '  - zarr',
    '# a comment',
    'prefix: /opt/env',
  ].join('\n');
  const r = environmentYmlRequirements(yml);
  assert.deepEqual(r.requirements, [
    'boto3',
    'dask',
    'numpy>=1.23',
    'numbagg',
    'types-pkg_resources',
    'zarr',
  ]);
  assert.deepEqual(r.skipped, ['python=3.10', 'hdf5', 'pip']);
});
