/**
 * Python's str semantics, for parsers that must split a line exactly as the official (Python) parsers
 * do: `str.split()` and `str.strip()` cut at the characters `str.isspace()` accepts, which is not
 * JavaScript's `\s` (Python counts \x1c-\x1f and \x85; JavaScript counts \ufeff). `log.split("\n")`
 * keeps a trailing \r on each line.
 */

export const PY_SPACE =
  '\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const RUN = new RegExp(`[${PY_SPACE}]+`);
const EDGES = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, 'g');

/** `s.split()` */
export function pySplit(s: string): string[] {
  return s.split(RUN).filter((part) => part !== '');
}

/** `s.strip()` */
export function pyStrip(s: string): string {
  return s.replace(EDGES, '');
}

/** `s.split(sep)[0]` */
export function beforeFirst(s: string, sep: string): string {
  const at = s.indexOf(sep);
  return at === -1 ? s : s.slice(0, at);
}

/** `s.rsplit(sep, 1)[0]` */
export function beforeLast(s: string, sep: string): string {
  const at = s.lastIndexOf(sep);
  return at === -1 ? s : s.slice(0, at);
}

/** `log.split("\n")` */
export function pyLines(log: string): string[] {
  return log.split('\n');
}
