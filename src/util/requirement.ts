/**
 * A requirement is a requirement (issue 43): an entry of a requirement list (a row's `pip_packages`, a
 * spec's `packages` and `pip_packages`, the lines of a requirements file or of an environment.yml's
 * `pip:` list) is handed to pip as a requirement, so it must be one: a project name, extras, version
 * specifiers and an environment marker (PEP 508 without a URL). Refused: an entry that starts with `-`
 * (a pip option: `-r FILE` made pip read any file of the host and print its first line back; `-e`,
 * `--index-url`, `--no-build-isolation`, ...), a URL (`name @ url`, `http(s)://`, `file://`, `git+...`),
 * a path or an archive (pip builds what it finds there: an sdist's setup.py runs). One place, read by the
 * dataset reader (src/rollout/dataset.ts) and the environment recipe (src/rollout/env/recipe.ts).
 */

/** PEP 508 name (letters, digits, `.`, `_`, `-`; starts and ends with a letter or digit) */
const NAME = '[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?';
const EXTRAS = String.raw`\[\s*(?:${NAME}(?:\s*,\s*${NAME})*)?\s*\]`;
const VERSION = '[A-Za-z0-9.*+!_-]+';
const CLAUSE = String.raw`(?:===|==|!=|<=|>=|~=|<|>)\s*${VERSION}`;
const SPECIFIERS = String.raw`${CLAUSE}(?:\s*,\s*${CLAUSE})*`;
/** an environment marker: names, quoted values, comparison operators, `and`/`or`, parentheses */
const MARKER = String.raw`[A-Za-z0-9_.\s'"<>=!~(),*+-]+`;
const REQUIREMENT = new RegExp(
  String.raw`^${NAME}\s*(?:${EXTRAS})?\s*(?:${SPECIFIERS}|\(\s*${SPECIFIERS}\s*\))?\s*(?:;\s*${MARKER})?$`,
);

const ARCHIVE = /\.(?:whl|zip|tar|tgz|tar\.gz|tar\.bz2|tbz|tar\.xz|txz|egg)$/i;

/** The entry without a pip requirements-file comment (` # ...`), trimmed. */
export function withoutComment(entry: string): string {
  return entry.replace(/(^|\s)#.*$/, '').trim();
}

/**
 * Why `entry` is not a plain requirement (a pip option, a URL, a path, an archive, or not PEP 508), or
 * null when it is one. Pass the entry as given; a trailing ` # comment` is allowed.
 */
export function requirementProblem(entry: string): string | null {
  const text = withoutComment(entry);
  if (text === '') return 'is empty';
  if (text.startsWith('-')) return 'is a pip option, not a requirement';
  if (/[a-z][a-z0-9+.-]*:\/\//i.test(text) || /^(?:git|hg|svn|bzr)\+/i.test(text) || /\s@|^[^;]*@/.test(text))
    return 'is a URL, not a requirement (name a version the package index has)';
  if (/^[.~/\\]/.test(text) || /[/\\]/.test(text.split(';')[0]!) || ARCHIVE.test(text.split(';')[0]!.trim()))
    return 'is a path or an archive, not a requirement (name a version the package index has)';
  if (!REQUIREMENT.test(text)) return 'is not a requirement (PEP 508: name, [extras], version, ; marker)';
  return null;
}

/** Calls `fail` with the first entry of `list` that is not a requirement, naming it and why. */
export function checkRequirements(list: readonly string[], fail: (problem: string) => never): void {
  for (const entry of list) {
    const problem = requirementProblem(entry);
    if (problem) fail(`entry ${JSON.stringify(entry)} ${problem}`);
  }
}
