// No test reads or writes the user's HOME or polar's cache (issue 47 item 9). scripts/test.mjs runs the
// suite with HOME, POLAR_CACHE_DIR and the XDG folders pointed into a fresh temporary folder, and
// test/support/own-home.mjs (preloaded into every test file's process) gives each test file its own HOME
// and polar cache under it. What a test needs of the user's set-up travels by path, not through HOME:
// pip's configuration (PIP_CONFIG_FILE: the index or the wheel mirror), npm's configuration and package
// cache (npm_config_userconfig, npm_config_cache: the package tests install offline from what npm ci
// fetched) and pyenv's interpreters (PYENV_ROOT). Afterwards the runner checks that the user's polar cache
// is as it was: a test that reaches it by a path HOME does not move (os.userInfo().homedir, a path
// written out) fails the run, naming what changed.
import { existsSync, lstatSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/** The user's own folders, as the environment the runner started in names them. */
export function realPlaces(env = process.env) {
  const homes = [...new Set([env.HOME, safeUserHome()].filter(Boolean))];
  const caches = new Set();
  if (env.POLAR_CACHE_DIR) caches.add(env.POLAR_CACHE_DIR);
  if (env.XDG_CACHE_HOME) caches.add(join(env.XDG_CACHE_HOME, 'polar'));
  for (const home of homes) caches.add(join(home, '.cache', 'polar'));
  return { homes, caches: [...caches] };
}

function safeUserHome() {
  try {
    return userInfo().homedir;
  } catch {
    return undefined;
  }
}

/** The first of pip's per-user configuration files that exists (pip reads them from HOME), or undefined. */
function pipConfig(env, home) {
  if (env.PIP_CONFIG_FILE) return env.PIP_CONFIG_FILE;
  const candidates = [
    join(env.XDG_CONFIG_HOME ?? join(home, '.config'), 'pip', 'pip.conf'),
    join(home, '.pip', 'pip.conf'),
  ];
  return candidates.find((p) => existsSync(p));
}

/**
 * A fresh HOME for a test run under `parent` (default: the system's temp folder), and the environment
 * that points there, with the user's tool configuration passed by path.
 */
export function testHome(env = process.env, parent = tmpdir()) {
  const home = mkdtempSync(join(parent, 'polar-test-home-'));
  const userHome = env.HOME ?? safeUserHome() ?? home;
  const pass = {};
  const pip = pipConfig(env, userHome);
  if (pip) pass.PIP_CONFIG_FILE = pip;
  const npmrc = env.npm_config_userconfig ?? join(userHome, '.npmrc');
  if (existsSync(npmrc)) pass.npm_config_userconfig = npmrc;
  pass.npm_config_cache = env.npm_config_cache ?? join(userHome, '.npm');
  const pyenv = env.PYENV_ROOT ?? join(userHome, '.pyenv');
  if (existsSync(pyenv)) pass.PYENV_ROOT = pyenv;
  return { home, env: { ...env, ...homeEnv(home), ...pass, POLAR_TEST_HOME_BASE: home } };
}

/** The variables that put HOME, polar's cache and the XDG folders into `home`. */
export function homeEnv(home) {
  return {
    HOME: home,
    POLAR_CACHE_DIR: join(home, '.cache', 'polar'),
    XDG_CACHE_HOME: join(home, '.cache'),
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_DATA_HOME: join(home, '.local', 'share'),
    XDG_STATE_HOME: join(home, '.local', 'state'),
  };
}

/**
 * Everything under each path as `path -> type, size, mtime, inode` (lstat: a link is not followed), or
 * `absent`: what a test that created, removed, replaced or wrote any file or folder there changes.
 */
export function snapshot(paths) {
  const out = new Map();
  const walk = (path) => {
    let st;
    try {
      st = lstatSync(path, { bigint: true });
    } catch {
      out.set(path, 'absent');
      return;
    }
    const kind = st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'link' : 'file';
    out.set(path, `${kind} ${st.size} ${st.mtimeNs} ${st.ino}`);
    if (kind !== 'dir') return;
    let names = [];
    try {
      names = readdirSync(path);
    } catch {
      return;
    }
    for (const name of names.sort()) walk(join(path, name));
  };
  for (const path of paths) walk(path);
  return out;
}

/** What differs between two snapshots: `created`, `removed`, `changed` paths (at most `limit` each). */
export function differences(before, after, limit = 10) {
  const created = [];
  const removed = [];
  const changed = [];
  for (const [path, now] of after) {
    const was = before.get(path);
    if (was === undefined || (was === 'absent' && now !== 'absent')) created.push(path);
    else if (now === 'absent' && was !== 'absent') removed.push(path);
    else if (was !== now) changed.push(path);
  }
  for (const path of before.keys()) if (!after.has(path)) removed.push(path);
  const cut = (a) => a.slice(0, limit);
  const total = created.length + removed.length + changed.length;
  return { total, created: cut(created), removed: cut(removed), changed: cut(changed) };
}

/** The lines the runner prints when the user's polar cache changed during the run. */
export function describeDifferences(d) {
  const lines = [
    `# FAIL: the user's polar cache changed while the tests ran (${d.total} paths): a test reached it past the HOME and POLAR_CACHE_DIR the runner gave it (or another process on this machine wrote there)`,
  ];
  for (const [what, paths] of [
    ['created', d.created],
    ['removed', d.removed],
    ['changed', d.changed],
  ])
    for (const path of paths) lines.push(`#   ${what} ${path}`);
  return lines;
}

/** Removes a run's HOME (kept with POLAR_KEEP_TEST_DIRS=1). */
export function removeHome(home) {
  if (process.env.POLAR_KEEP_TEST_DIRS === '1') {
    process.stderr.write(`POLAR_KEEP_TEST_DIRS=1: kept the tests' HOME ${home}\n`);
    return;
  }
  try {
    rmSync(home, { recursive: true, force: true, maxRetries: 2 });
  } catch {
    // a folder a test made unreadable: left
  }
}
