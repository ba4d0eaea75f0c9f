/**
 * pytest `-rA` parsers. The ids in SWE-bench's FAIL_TO_PASS / PASS_TO_PASS lists were produced by the
 * official harness's own parsers, so each function here reproduces how its original splits a line,
 * quirks included: a different split gives ids that never match the dataset. Shaped by
 * SWE-bench/SWE-bench swebench/harness/log_parsers/python.py at v4.1.0 (`version` '4.1') and v5.0.1
 * ('5'): parse_log_pytest, parse_log_pytest_options, parse_log_pytest_v2, parse_log_seaborn,
 * parse_log_matplotlib. Lines are split as Python's `str.split()` does (python-str.ts).
 */
import { beforeFirst, pyLines, pySplit } from './python-str.ts';
import { type ParserVersion, type StatusMap, TEST_STATUSES } from './types.ts';

const startsWithStatus = (line: string) => TEST_STATUSES.some((s) => line.startsWith(s));
const endsWithStatus = (line: string) => TEST_STATUSES.some((s) => line.endsWith(s));

/** 5.x `_is_skip_summary`: `SKIPPED [2] path:line: reason` names no test (v5.0.1 only). */
function isSkipSummary(version: ParserVersion, status: string, name: string): boolean {
  return version === '5' && status === 'SKIPPED' && /^\[\p{Nd}+\]$/u.test(name);
}

/** `STATUS id` lines; a FAILED line loses every ` - ` first, so its message cannot be the id. */
function summaryLine(line: string, version: ParserVersion): [string, string] | null {
  if (!startsWithStatus(line)) return null;
  const text = line.startsWith('FAILED') ? line.replaceAll(' - ', ' ') : line;
  const parts = pySplit(text);
  if (parts.length <= 1 || isSkipSummary(version, parts[0]!, parts[1]!)) return null;
  return [parts[1]!, parts[0]!];
}

/** parse_log_pytest (also astroid, flask, marshmallow, pvlib, pyvista, sqlfluff, xarray) */
export function parsePytest(log: string, version: ParserVersion = '4.1'): StatusMap {
  const map: StatusMap = new Map();
  for (const line of pyLines(log)) {
    const hit = summaryLine(line, version);
    if (hit) map.set(hit[0], hit[1]);
  }
  return map;
}

/**
 * parse_log_pytest_options (requests, pylint, pydicom): the id is still the second word (a space in
 * a parameter cuts it), then `main[option]` is rebuilt from the first `[` to the last `]`, and an
 * option that is an absolute path (not `//`, no `*`) is shortened to its last segment: `[/a/b/c.py]`
 * becomes `[/c.py]`.
 */
export function parsePytestOptions(log: string, version: ParserVersion = '4.1'): StatusMap {
  const map: StatusMap = new Map();
  for (const line of pyLines(log)) {
    const hit = summaryLine(line, version);
    if (!hit) continue;
    const [word, status] = hit;
    // re.compile(r"(.*?)\[(.*)\]").search(word): the first "[" that some later "]" closes
    const open = word.indexOf('[');
    const close = word.lastIndexOf(']');
    let name = word;
    if (open !== -1 && close > open) {
      const main = word.slice(0, open);
      let option = word.slice(open + 1, close);
      if (option.startsWith('/') && !option.startsWith('//') && !option.includes('*')) {
        option = `/${option.split('/').at(-1)}`;
      }
      name = `${main}[${option}]`;
    }
    map.set(name, status);
  }
  return map;
}

// escapes removed by parse_log_pytest_v2: chr(1)..chr(31)
const CONTROL = /[\x01-\x1f]/g;
// re.sub(r"\[(\d+)m", "", line): \d is any Unicode decimal digit in a Python str pattern
const COLOUR = /\[\p{Nd}+m/gu;

/**
 * parse_log_pytest_v2 (astropy, scikit-learn, sphinx): colour codes and control characters removed,
 * then summary lines, or `id ... STATUS` verbose lines (older pytest). v4.1.0 keeps the second word
 * (first word for verbose lines); v5.0.1 keeps every word but the status, and cuts a FAILED line at
 * its first ` - `.
 */
export function parsePytestV2(log: string, version: ParserVersion = '4.1'): StatusMap {
  const map: StatusMap = new Map();
  for (const raw of pyLines(log)) {
    let line = raw.replace(COLOUR, '').replace(CONTROL, '');
    if (startsWithStatus(line)) {
      if (line.startsWith('FAILED'))
        line = version === '5' ? beforeFirst(line, ' - ') : line.replaceAll(' - ', ' ');
      const parts = pySplit(line);
      if (parts.length < 2) continue;
      if (version === '5') {
        if (!isSkipSummary(version, parts[0]!, parts[1]!)) map.set(parts.slice(1).join(' '), parts[0]!);
      } else map.set(parts[1]!, parts[0]!);
    } else if (endsWithStatus(line)) {
      const parts = pySplit(line);
      if (parts.length < 2) continue;
      if (version === '5') map.set(parts.slice(0, -1).join(' '), parts.at(-1)!);
      else map.set(parts[0]!, parts[1]!);
    }
  }
  return map;
}

/** parse_log_matplotlib: parse_log_pytest after MouseButton reprs are printed by value. */
export function parseMatplotlib(log: string, version: ParserVersion = '4.1'): StatusMap {
  const map: StatusMap = new Map();
  for (const raw of pyLines(log)) {
    const line = raw.replaceAll('MouseButton.LEFT', '1').replaceAll('MouseButton.RIGHT', '3');
    const hit = summaryLine(line, version);
    if (hit) map.set(hit[0], hit[1]);
  }
  return map;
}

/**
 * parse_log_seaborn (`pytest --no-header -rA`): only PASSED and FAILED are recorded, from summary
 * lines and `id PASSED` progress lines; a test that PASSED and then ERRORed in tear-down stays PASSED,
 * ERROR / SKIPPED / XFAIL lines are not read at all. (A bare `FAILED` line raises IndexError in v4.1.0;
 * here it is skipped, as v5.0.1 does.)
 */
export function parseSeaborn(log: string, _version: ParserVersion = '4.1'): StatusMap {
  const map: StatusMap = new Map();
  for (const line of pyLines(log)) {
    const parts = pySplit(line);
    if (parts.length < 2) continue;
    if (line.startsWith('FAILED')) map.set(parts[1]!, 'FAILED');
    else if (line.includes(' PASSED ')) {
      if (parts[1] === 'PASSED') map.set(parts[0]!, 'PASSED');
    } else if (line.startsWith('PASSED')) map.set(parts[1]!, 'PASSED');
  }
  return map;
}
