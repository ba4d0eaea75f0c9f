/**
 * Where pip would look for packages, read as pip reads it (pip 23 `pip/_internal/configuration.py`:
 * files in the override order global < user < PIP_CONFIG_FILE < environment variables, each file's
 * `[global]` section then `[install]`; the user files are skipped when PIP_CONFIG_FILE names a file that
 * exists, and every file when it is os.devnull). A sandboxed environment build (build-sandbox.ts) binds
 * what is local read-only and shares the network only when a source is remote: the default index
 * (PyPI) unless `no-index`, or any http(s) index or find-links.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface PipSources {
  /** local folders and files pip reads packages from (file:// indexes, find-links paths) */
  local: string[];
  /** remote sources (URLs), the default index included unless no-index */
  remote: string[];
  /** the configuration files pip reads (to be visible at the same path) */
  configFiles: string[];
  /** certificate files pip or its requests use, named by a variable or a configuration file */
  certificates: string[];
}

type Env = Record<string, string | undefined>;

const DEFAULT_INDEX = 'https://pypi.org/simple';

/** The configuration files pip reads for `env`, in override order (those that exist). */
export function pipConfigFiles(env: Env): string[] {
  const given = env.PIP_CONFIG_FILE;
  if (given === '/dev/null') return [];
  const home = env.HOME || homedir();
  const xdgDirs = (env.XDG_CONFIG_DIRS || '/etc/xdg').split(':').filter(Boolean);
  const global = [...xdgDirs.map((d) => join(d, 'pip', 'pip.conf')), '/etc/pip.conf'];
  const user = [
    join(home, '.pip', 'pip.conf'),
    join(env.XDG_CONFIG_HOME || join(home, '.config'), 'pip', 'pip.conf'),
  ];
  const givenExists = given !== undefined && given !== '' && existsSync(given);
  const files = [...global, ...(givenExists ? [] : user), ...(givenExists ? [given] : [])];
  return files.filter((f) => existsSync(f));
}

/** The keys of a pip configuration file's `[global]` then `[install]` sections (names normalised). */
export function readPipConfig(text: string): Map<string, string> {
  const sections = new Map<string, Map<string, string>>();
  let section: Map<string, string> | null = null;
  let key: string | null = null;
  for (const raw of text.split('\n')) {
    if (/^\s*[#;]/.test(raw) || raw.trim() === '') continue;
    const header = /^\s*\[([^\]]+)\]\s*$/.exec(raw);
    if (header) {
      const name = header[1]!.trim().toLowerCase();
      section = sections.get(name) ?? new Map();
      sections.set(name, section);
      key = null;
      continue;
    }
    if (section === null) continue;
    if (/^\s/.test(raw) && key !== null) {
      // a continuation line: one more value of the key above
      section.set(key, `${section.get(key) ?? ''}\n${raw.trim()}`);
      continue;
    }
    const pair = /^([^=:]+)[=:](.*)$/.exec(raw);
    if (!pair) continue;
    key = pair[1]!.trim().toLowerCase().replaceAll('_', '-');
    section.set(key, pair[2]!.trim());
  }
  return new Map([...(sections.get('global') ?? []), ...(sections.get('install') ?? [])]);
}

const truthy = (v: string) => ['y', 'yes', 't', 'true', 'on', '1'].includes(v.trim().toLowerCase());

/** A source as a local path (file:// URL, absolute or relative path), or null for a remote one. */
function localPath(source: string, cwd: string): string | null {
  if (/^file:/i.test(source)) {
    try {
      return fileURLToPath(source);
    } catch {
      return null;
    }
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(source)) return null;
  return isAbsolute(source) ? source : resolve(cwd, source);
}

/** Where pip looks for packages with `env`, as the sandbox needs it. */
export function pipSources(env: Env, cwd = process.cwd()): PipSources {
  const configFiles = pipConfigFiles(env);
  const settings = new Map<string, string>();
  for (const file of configFiles) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const [k, v] of readPipConfig(text)) settings.set(k, v);
  }
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('PIP_') || value === undefined || name === 'PIP_CONFIG_FILE') continue;
    settings.set(name.slice(4).toLowerCase().replaceAll('_', '-'), value);
  }
  const words = (key: string) => (settings.get(key) ?? '').split(/\s+/).filter(Boolean);
  const noIndex = truthy(settings.get('no-index') ?? '');
  const indexes = noIndex
    ? []
    : [
        ...(words('index-url').slice(0, 1).length ? words('index-url').slice(0, 1) : [DEFAULT_INDEX]),
        ...words('extra-index-url'),
      ];
  const local: string[] = [];
  const remote: string[] = [];
  for (const source of indexes) {
    const path = localPath(source, cwd);
    if (path === null) remote.push(source);
    // a simple index's files usually sit beside its simple/ folder (../../files/...): its parent too
    else local.push(/\/simple\/?$/.test(path) && dirname(path) !== '/' ? dirname(path) : path);
  }
  for (const source of words('find-links')) {
    const path = localPath(source, cwd);
    if (path === null) remote.push(source);
    else local.push(isFile(path) ? dirname(path) : path);
  }
  const certificates = [
    settings.get('cert'),
    settings.get('client-cert'),
    env.SSL_CERT_FILE,
    env.SSL_CERT_DIR,
    env.REQUESTS_CA_BUNDLE,
  ].filter((p): p is string => typeof p === 'string' && isAbsolute(p) && existsSync(p));
  return {
    local: [...new Set(local)].filter((p) => existsSync(p)),
    remote: [...new Set(remote)],
    configFiles,
    certificates: [...new Set(certificates)],
  };
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
