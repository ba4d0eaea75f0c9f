/**
 * The spec's `packages` for pip: polar builds environments with venv and pip (no conda), so a conda
 * package list (`"numpy scipy cython"`, `"'numpy==1.19.2' 'pandas<2.0.0'"`) and the conda part of an
 * environment.yml become pip requirement lines. Conda's `name=1.19` (any 1.19.x) is pip's
 * `name==1.19.*`, `name=1.19.2=build` is `name==1.19.2`; conda names of C libraries and tools that are
 * not Python packages are left out (and reported), a few conda names that differ on PyPI are renamed.
 * Anything else goes to pip as it is, and a name pip does not know fails the build, by name.
 */

/** conda packages that are the interpreter, pip itself, or C libraries and tools (not on PyPI as such) */
const NOT_PIP = new Set([
  'python',
  'pip',
  '_libgcc_mutex',
  '_openmp_mutex',
  'ca-certificates',
  'ld_impl_linux-64',
  'libffi',
  'libgcc-ng',
  'libgomp',
  'libstdcxx-ng',
  'ncurses',
  'openssl',
  'readline',
  'sqlite',
  'tk',
  'xz',
  'zlib',
  'compilers',
  'c-compiler',
  'cxx-compiler',
  'make',
  'pkg-config',
  'ccache',
  'ffmpeg',
  'graphviz',
  'imagemagick',
  'hdf5',
  'libnetcdf',
  'proj',
  'geos',
  'freetype',
  'qhull',
]);

/** conda-forge names whose PyPI package has another name */
const RENAMED: Record<string, string> = {
  'dask-core': 'dask',
  'matplotlib-base': 'matplotlib',
  pytorch: 'torch',
  pytables: 'tables',
};

/** Words of a shell-quoted list, as `conda create ... {pkgs}` would get them from the shell. */
export function shellWords(text: string): string[] {
  const out: string[] = [];
  let word = '';
  let quote: string | null = null;
  let inWord = false;
  for (const c of text) {
    if (quote) {
      if (c === quote) quote = null;
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) out.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord) out.push(word);
  return out;
}

/** One conda match spec as a pip requirement, or null when pip has no counterpart. */
export function condaToPip(spec: string): string | null {
  const m = /^([A-Za-z0-9_.-]+(?:\[[^\]]*\])?)\s*(.*)$/.exec(spec.trim());
  if (!m) return spec.trim() || null;
  const name = m[1]!;
  const bare = name.replace(/\[.*$/, '').toLowerCase();
  if (NOT_PIP.has(bare)) return null;
  const pipName = RENAMED[bare] ?? name;
  const rest = m[2]!.trim();
  if (rest === '') return pipName;
  // conda's exact `=version` (and `=version=build`): any release that starts with the version
  const single = /^=([^=<>!,\s]+)(?:=\S+)?$/.exec(rest);
  if (single) {
    const v = single[1]!;
    return m[2]!.includes('=', 1) || v.endsWith('*') ? `${pipName}==${v}` : `${pipName}==${v}.*`;
  }
  const exact = /^==([^=\s]+)=\S+$/.exec(rest);
  if (exact) return `${pipName}==${exact[1]}`;
  return `${pipName}${rest}`;
}

/**
 * The pip requirements of an environment.yml (`dependencies:` list, and its `pip:` sub-list taken as
 * it is), with the conda names pip has no counterpart for.
 */
export function environmentYmlRequirements(text: string): { requirements: string[]; skipped: string[] } {
  const requirements: string[] = [];
  const skipped: string[] = [];
  let inDeps = false;
  let pipIndent: number | null = null;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\s+#.*$/, '').replace(/^#.*$/, '');
    if (line.trim() === '') continue;
    const indent = line.length - line.trimStart().length;
    if (indent === 0) {
      inDeps = /^dependencies\s*:/.test(line);
      pipIndent = null;
      continue;
    }
    if (!inDeps) continue;
    const item = /^\s*-\s*(.*)$/.exec(line);
    if (!item) continue;
    const value = item[1]!.trim().replace(/^["']|["']$/g, '');
    if (pipIndent !== null && indent > pipIndent) {
      requirements.push(value);
      continue;
    }
    pipIndent = null;
    if (/^pip\s*:$/.test(value)) {
      pipIndent = indent;
      continue;
    }
    const pip = condaToPip(value);
    if (pip === null) skipped.push(value);
    else requirements.push(pip);
  }
  return { requirements, skipped };
}

/** A conda package list (`packages: "numpy scipy 'pandas<2.0.0'"`) as pip requirements. */
export function condaListRequirements(text: string): { requirements: string[]; skipped: string[] } {
  const requirements: string[] = [];
  const skipped: string[] = [];
  for (const word of shellWords(text)) {
    const pip = condaToPip(word);
    if (pip === null) skipped.push(word);
    else requirements.push(pip);
  }
  return { requirements, skipped };
}
