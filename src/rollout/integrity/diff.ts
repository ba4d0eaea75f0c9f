/**
 * A unified diff (git's format, as polar takes and grades it) read per file, for the integrity layers:
 * both sides of each header (a rename touches two paths), whether the file is new, deleted or a
 * symlink, and the added lines with their line numbers in the new file. Paths git quotes (a tab, a
 * quote, a backslash or a byte over 0x7f in the name: `diff --git "a/x\ty" "b/x\ty"`) are unquoted,
 * so a file cannot escape a check by its name's spelling. Pure.
 */

export interface DiffFile {
  /** the old path (null for a new file) */
  a: string | null;
  /** the new path (null for a deleted file) */
  b: string | null;
  added: boolean;
  deleted: boolean;
  /** the new side is a symlink (mode 120000) */
  symlink: boolean;
  /** a binary change (`GIT binary patch` or `Binary files ... differ`) */
  binary: boolean;
  /** added lines: [line number in the new file, text] */
  lines: Array<[number, string]>;
  /** changed lines of both sides with their prefix (' ' context, '+', '-') in hunk order */
  hunks: string[];
}

const ESCAPES: Record<string, string> = { a: '\x07', b: '\b', t: '\t', n: '\n', v: '\v', f: '\f', r: '\r' };

/** git's C-style quoting of a path (quote_c_style): `"a/x\ty\303\251"` -> `a/x<TAB>yé` */
export function unquotePath(text: string): string {
  if (!text.startsWith('"')) return text;
  const bytes: number[] = [];
  const inner = text.slice(1, text.endsWith('"') ? -1 : undefined);
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i]!;
    if (c !== '\\') {
      bytes.push(...Buffer.from(c, 'utf8'));
      continue;
    }
    const next = inner[++i] ?? '';
    if (/[0-7]/.test(next)) {
      bytes.push(Number.parseInt(inner.slice(i, i + 3), 8));
      i += 2;
    } else bytes.push(...Buffer.from(ESCAPES[next] ?? next, 'utf8'));
  }
  return Buffer.from(bytes).toString('utf8');
}

/** `a/x b/y` or `"a/x" "b/y"` (either side may be quoted) -> [x, y] */
function headerPaths(rest: string): [string, string] | null {
  const quoted = /^("(?:[^"\\]|\\.)*"|\S.*?) ("(?:[^"\\]|\\.)*"|b\/.*)$/.exec(rest);
  if (!quoted) return null;
  const a = unquotePath(quoted[1]!);
  const b = unquotePath(quoted[2]!);
  if (!a.startsWith('a/') || !b.startsWith('b/')) return null;
  return [a.slice(2), b.slice(2)];
}

/** `--- a/x` / `+++ b/x` / `rename from x` lines: the path, unquoted, without its a/ or b/ */
function sidePath(text: string, prefix: string): string | null {
  const path = unquotePath(text.trim());
  if (path === '/dev/null') return null;
  return prefix && path.startsWith(prefix) ? path.slice(prefix.length) : path;
}

/** The patch file by file. */
export function parseDiff(patch: string): DiffFile[] {
  const files: DiffFile[] = [];
  let current: DiffFile | null = null;
  let newLine = 0;
  let inHunk = false;
  for (const line of patch.split('\n')) {
    if (line.startsWith('diff --git ')) {
      const paths = headerPaths(line.slice('diff --git '.length));
      current = {
        a: paths?.[0] ?? null,
        b: paths?.[1] ?? null,
        added: false,
        deleted: false,
        symlink: false,
        binary: false,
        lines: [],
        hunks: [],
      };
      files.push(current);
      inHunk = false;
      continue;
    }
    if (!current) continue;
    const hunk = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (hunk) {
      newLine = Number(hunk[1]);
      inHunk = true;
      continue;
    }
    if (inHunk && /^[ +-]/.test(line)) {
      current.hunks.push(line);
      if (line[0] === '+') current.lines.push([newLine++, line.slice(1)]);
      else if (line[0] === ' ') newLine++;
      continue;
    }
    if (inHunk && line.startsWith('\\')) continue; // "\ No newline at end of file"
    inHunk = false;
    if (line.startsWith('new file mode ')) {
      current.added = true;
      current.a = null;
      current.symlink = line.endsWith('120000');
    } else if (line.startsWith('deleted file mode ')) {
      current.deleted = true;
      current.b = null;
    } else if (line.startsWith('new mode ')) current.symlink = line.endsWith('120000');
    else if (line.startsWith('rename from ')) current.a = sidePath(line.slice(12), '');
    else if (line.startsWith('rename to ')) current.b = sidePath(line.slice(10), '');
    else if (line.startsWith('--- ')) {
      const a = sidePath(line.slice(4), 'a/');
      if (a !== null || current.added) current.a = a;
    } else if (line.startsWith('+++ ')) {
      const b = sidePath(line.slice(4), 'b/');
      if (b !== null || current.deleted) current.b = b;
    } else if (line.startsWith('GIT binary patch') || /^Binary files .* differ$/.test(line))
      current.binary = true;
  }
  return files;
}

/** Every path a patch touches, old and new sides, once each. */
export function touchedPaths(files: DiffFile[]): string[] {
  const out = new Set<string>();
  for (const f of files) {
    if (f.a !== null) out.add(f.a);
    if (f.b !== null) out.add(f.b);
  }
  return [...out];
}
