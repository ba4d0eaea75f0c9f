/**
 * sympy's bin/test --verbose, read as swebench's parse_log_sympy does (SWE-bench/SWE-bench
 * swebench/harness/log_parsers/python.py, identical at v4.1.0 and v5.0.1): every `___ path.py:name ___`
 * banner anywhere in the log records `path.py:name` as FAILED, then a line starting `test_` and ending
 * ` E`, ` F` or ` ok` records its first word. A test whose printed output pushes its status onto a
 * later line is not recorded (as officially); XFAIL (`f`), skips (`s`) and XPASS (`X`) are not either.
 */
import { pyLines, pySplit, pyStrip } from './python-str.ts';
import type { StatusMap } from './types.ts';

// r"(_*) (.*)\.py:(.*) (_*)" with re.findall over the whole log (`.` stops at a newline)
const BANNER = /(_*) ([^\n]*)\.py:([^\n]*) (_*)/g;

export function parseSympy(log: string): StatusMap {
  const map: StatusMap = new Map();
  for (const m of log.matchAll(BANNER)) map.set(`${m[2]}.py:${m[3]}`, 'FAILED');
  for (const raw of pyLines(log)) {
    const line = pyStrip(raw);
    if (!line.startsWith('test_')) continue;
    const name = pySplit(line)[0]!;
    if (line.endsWith(' E')) map.set(name, 'ERROR');
    if (line.endsWith(' F')) map.set(name, 'FAILED');
    if (line.endsWith(' ok')) map.set(name, 'PASSED');
  }
  return map;
}
