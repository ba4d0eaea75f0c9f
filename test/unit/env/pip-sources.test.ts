/**
 * Where pip looks for packages, as the build sandbox binds it (src/rollout/env/pip-sources.ts): files in pip's
 * override order, [global] then [install], variables over files, PIP_CONFIG_FILE=/dev/null for none;
 * a file:// simple index with its parent (its files sit beside simple/), find-links paths; remote: the
 * default index (PyPI) unless no-index, and any http(s) source. No real HOME is read: each case names
 * its own.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pipConfigFiles, pipSources, readPipConfig } from '../../../src/rollout/env/pip-sources.ts';
import { tempDir } from '../../support/temp.ts';

const dir = tempDir('polar-pip-sources-');
const mirror = join(dir, 'mirror');
mkdirSync(join(mirror, 'simple'), { recursive: true });
mkdirSync(join(mirror, 'files'));
const wheels = join(dir, 'wheels');
mkdirSync(wheels);

function home(name: string, conf: string | null): string {
  const h = join(dir, name);
  mkdirSync(join(h, '.config', 'pip'), { recursive: true });
  if (conf !== null) writeFileSync(join(h, '.config', 'pip', 'pip.conf'), conf);
  return h;
}

test('a configuration file: [global] then [install], continuation lines, names with _ or -', () => {
  const settings = readPipConfig(
    `# comment\n[global]\nindex_url = https://a/simple\nextra-index-url =\n    file:///x/simple\n    https://b/simple\n[install]\nindex-url = https://c/simple\n[download]\nindex-url = https://d\n`,
  );
  assert.equal(settings.get('index-url'), 'https://c/simple');
  assert.equal(settings.get('extra-index-url'), '\nfile:///x/simple\nhttps://b/simple');
});

test('no configuration and no variables: PyPI, remote', () => {
  const s = pipSources({ PIP_CONFIG_FILE: '/dev/null' });
  assert.deepEqual(s.remote, ['https://pypi.org/simple']);
  assert.deepEqual(s.local, []);
  assert.deepEqual(s.configFiles, []);
});

test("the user's pip.conf naming a file:// index and find-links: local paths (the index with its parent), PyPI still remote", () => {
  const h = home(
    'with-mirror',
    `[global]\nfind-links = ${wheels}\nextra-index-url = file://${mirror}/simple\n`,
  );
  const s = pipSources({ HOME: h, XDG_CONFIG_DIRS: join(dir, 'no-xdg') });
  assert.ok(s.configFiles.includes(join(h, '.config', 'pip', 'pip.conf')));
  assert.deepEqual(s.local.sort(), [mirror, wheels].sort());
  assert.deepEqual(s.remote, ['https://pypi.org/simple']);
  // no-index: every source local, so a build needs no network
  const offline = pipSources({ HOME: h, XDG_CONFIG_DIRS: join(dir, 'no-xdg'), PIP_NO_INDEX: '1' });
  assert.deepEqual(offline.remote, []);
  assert.deepEqual(offline.local, [wheels]);
  // a file:// index-url instead of PyPI: local too
  const own = pipSources({ PIP_CONFIG_FILE: '/dev/null', PIP_INDEX_URL: `file://${mirror}/simple` });
  assert.deepEqual([own.local, own.remote], [[mirror], []]);
});

test('variables win over files; PIP_CONFIG_FILE naming a file skips the user files; http(s) sources are remote', () => {
  const h = home('user', `[global]\nfind-links = ${wheels}\n`);
  const given = join(dir, 'given.conf');
  writeFileSync(given, '[global]\nindex-url = https://mirror.example/simple\n');
  const s = pipSources({ HOME: h, PIP_CONFIG_FILE: given, XDG_CONFIG_DIRS: join(dir, 'no-xdg') });
  assert.equal(s.configFiles.includes(join(h, '.config', 'pip', 'pip.conf')), false);
  assert.ok(s.configFiles.includes(given));
  assert.deepEqual(s.remote, ['https://mirror.example/simple']);
  assert.deepEqual(s.local, []);
  const v = pipSources({
    HOME: h,
    XDG_CONFIG_DIRS: join(dir, 'no-xdg'),
    PIP_FIND_LINKS: `https://links.example ${mirror}`,
    PIP_NO_INDEX: 'true',
  });
  assert.deepEqual([v.local, v.remote], [[mirror], ['https://links.example']]);
  assert.deepEqual(pipConfigFiles({ PIP_CONFIG_FILE: '/dev/null' }), []);
});
