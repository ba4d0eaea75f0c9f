/**
 * What a repository's install step needs besides the environment: the build requirements pip's build
 * isolation installs before it builds the tree (PEP 517/518: `[build-system] requires` of pyproject.toml;
 * for a setup.py without it, pip's own default `setuptools>=40.8.0` and `wheel`), and setuptools'
 * `setup_requires` (setup.cfg `[options]`, or a literal list in setup.py), which setuptools fetches with
 * pip while it runs. A setuptools backend also asks for `wheel` (setuptools before 70.1 returns it from
 * get_requires_for_build_wheel/editable). polar reads them from the sample's tree at its base_commit and
 * fetches them as wheels, through the user's own pip configuration, into the environment's wheelhouse
 * (`<environment>/wheelhouse`) when the environment is used for a tree the first time; the per-sample
 * install then runs offline against it (layer.ts: PIP_NO_INDEX, PIP_FIND_LINKS), in the sandbox (no
 * network) and on this machine alike.
 *
 * Why a wheelhouse, not `--no-build-isolation`: build isolation is what the official images run (`pip
 * install -e .` as the spec writes it); installing the build requirements into the environment would put
 * them beside the spec's own pins (setuptools==68.0.0 next to `setuptools>=64`) and change what the
 * tests import; the install command would have to change too. With the wheelhouse pip builds exactly as
 * it would online, from the same requirement lines, only offline.
 */
import { createHash } from 'node:crypto';
import { execTree } from '../exec.ts';

export interface BuildSystem {
  requires: string[] | null;
  backend: string | null;
}

/** the header of a TOML table or array of tables (`[build-system]`, `[[tool.x]]`) */
const TABLE = /^\s*\[\[?\s*([A-Za-z0-9_.\-"' ]+?)\s*\]\]?\s*(#.*)?$/;

/** The TOML strings of an array's text (basic strings with escapes, literal strings), comments skipped. */
function tomlStrings(text: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '#') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '"' || c === "'") {
      let s = '';
      i++;
      while (i < text.length && text[i] !== c) {
        if (c === '"' && text[i] === '\\' && i + 1 < text.length) {
          const e = text[i + 1]!;
          s += e === 'n' ? '\n' : e === 't' ? '\t' : e;
          i += 2;
        } else s += text[i++];
      }
      out.push(s);
      i++;
    } else i++;
  }
  return out;
}

/** The text of a TOML array starting at `from` (just after its `[`), up to its closing `]`. */
function arrayText(text: string, from: number): string {
  let depth = 1;
  let quote: string | null = null;
  for (let i = from; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === '\\' && quote === '"') i++;
      else if (c === quote) quote = null;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#') while (i < text.length && text[i] !== '\n') i++;
    else if (c === '[') depth++;
    else if (c === ']' && --depth === 0) return text.slice(from, i);
  }
  return text.slice(from);
}

/** `[build-system]` of a pyproject.toml: its `requires` (null when absent) and `build-backend`; null: no table. */
export function buildSystem(pyproject: string): BuildSystem | null {
  const lines = pyproject.split(/\r?\n/);
  const start = lines.findIndex((l) => TABLE.exec(l)?.[1]?.replace(/["' ]/g, '') === 'build-system');
  if (start === -1) return null;
  let end = start + 1;
  // the table ends at the next header (an array's own lines never look like one: they hold strings)
  while (end < lines.length && !TABLE.test(lines[end]!)) end++;
  const body = lines.slice(start + 1, end).join('\n');
  const requires = /^\s*requires\s*=\s*\[/m.exec(body);
  const backend = /^\s*build-backend\s*=\s*(?:"([^"]*)"|'([^']*)')/m.exec(body);
  return {
    requires: requires ? tomlStrings(arrayText(body, requires.index + requires[0].length)) : null,
    backend: backend ? (backend[1] ?? backend[2] ?? null) : null,
  };
}

/** `setup_requires` of a setup.cfg's `[options]` (a dangling list, or `;`-separated). */
export function setupCfgRequires(cfg: string): string[] {
  const lines = cfg.split(/\r?\n/);
  let section = '';
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const header = /^\s*\[([^\]]+)\]/.exec(line);
    if (header) {
      section = header[1]!.trim();
      continue;
    }
    const m = /^setup_requires\s*[=:]\s*(.*)$/.exec(line);
    if (section !== 'options' || !m) continue;
    const values = [m[1]!];
    for (let j = i + 1; j < lines.length && /^[ \t]+\S/.test(lines[j]!); j++) values.push(lines[j]!);
    return values
      .flatMap((v) => v.split(';'))
      .map((v) => v.replace(/\s+#.*$/, '').trim())
      .filter((v) => v !== '' && !v.startsWith('#'));
  }
  return [];
}

/** `setup_requires=[...]` written as a literal list in a setup.py (a computed one cannot be read). */
export function setupPyRequires(setupPy: string): string[] {
  const m = /\bsetup_requires\s*=\s*[[(]([^\])]*)[\])]/.exec(setupPy);
  return m ? tomlStrings(m[1]!.replace(/#[^\n]*/g, '')) : [];
}

const SETUPTOOLS_BACKEND = /^setuptools\.build_meta(:__legacy__)?$/;

export interface TreeBuildRequirements {
  /** requirement lines, in order, without duplicates */
  requirements: string[];
  /** where each part came from, for messages ("pyproject.toml [build-system]", "pip's default for setup.py") */
  from: string[];
}

/** The build requirements of a tree, from its pyproject.toml, setup.cfg and setup.py (null: not there). */
export function treeBuildRequirements(files: {
  pyproject: string | null;
  setupCfg: string | null;
  setupPy: string | null;
}): TreeBuildRequirements {
  const requirements: string[] = [];
  const from: string[] = [];
  const add = (lines: string[], what: string) => {
    const fresh = lines.filter((l) => !requirements.includes(l));
    if (fresh.length === 0) return;
    requirements.push(...fresh);
    from.push(what);
  };
  const system = files.pyproject === null ? null : buildSystem(files.pyproject);
  if (system?.requires) {
    add(system.requires, 'pyproject.toml [build-system] requires');
    if (system.backend === null || SETUPTOOLS_BACKEND.test(system.backend))
      add(['wheel'], "setuptools' get_requires_for_build_wheel");
  } else if (files.setupPy !== null) {
    // pip's own default build requirements for a tree without [build-system] requires (pip 21-25)
    add(['setuptools>=40.8.0', 'wheel'], "pip's default for a setup.py project");
  }
  if (files.setupCfg !== null) add(setupCfgRequires(files.setupCfg), 'setup.cfg setup_requires');
  if (files.setupPy !== null) add(setupPyRequires(files.setupPy), 'setup.py setup_requires');
  return { requirements, from };
}

/** Reads `<commit>:<path>` from a repository, or null. */
async function show(repoDir: string, commit: string, path: string): Promise<string | null> {
  const r = await execTree('git', ['-C', repoDir, 'show', `${commit}:${path}`], { timeoutMs: 60_000 });
  return r.exitCode === 0 ? r.stdout : null;
}

/** The build requirements of the tree of `commit` in `repoDir`. */
export async function commitBuildRequirements(
  repoDir: string,
  commit: string,
): Promise<TreeBuildRequirements> {
  const [pyproject, setupCfg, setupPy] = await Promise.all([
    show(repoDir, commit, 'pyproject.toml'),
    show(repoDir, commit, 'setup.cfg'),
    show(repoDir, commit, 'setup.py'),
  ]);
  return treeBuildRequirements({ pyproject, setupCfg, setupPy });
}

/** the key of a requirement set in a wheelhouse (fetched once) */
export const requirementsKey = (requirements: string[]) =>
  createHash('sha256')
    .update(JSON.stringify([...requirements].sort()))
    .digest('hex')
    .slice(0, 16);
