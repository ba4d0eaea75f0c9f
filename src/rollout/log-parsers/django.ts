/**
 * Django's runner at --verbosity 2 (`./tests/runtests.py`), read as swebench's parse_log_django does
 * (SWE-bench/SWE-bench swebench/harness/log_parsers/python.py; identical at v4.1.0 and v5.0.1). The id
 * is the text before ` ... ` on the line that carries the status, which for a test with a docstring is
 * the docstring's first line (`Named URLs should be reversible. ... ok`), not `test_x (m.C)`. An `ok`
 * line after printed output marks the last ` ... ` line passed; `FAIL:` / `ERROR:` headers record the
 * bare method name; `expected failure` and `unexpected success` are not recorded.
 */
import { beforeFirst, beforeLast, PY_SPACE, pyLines, pySplit, pyStrip } from './python-str.ts';
import type { StatusMap } from './types.ts';

const VERSION_DOC = '--version is equivalent to version';
const PASS_SUFFIXES = [' ... ok', ' ... OK', ' ...  OK'];
const S = `[${PY_SPACE}]`;
// whole-log patterns for an `ok` pushed to the next line by a long print (re.MULTILINE; `.` never
// crosses a newline, `(?s:.*?)` does)
const INTERRUPTED = [
  `(?<=^|\\n)([^\\n]*?)${S}\\.\\.\\.${S}Testing against Django installed in ([\\s\\S]*?) silenced\\)\\.\\nok(?=\\n|$)`,
  `(?<=^|\\n)([^\\n]*?)${S}\\.\\.\\.${S}Internal Server Error: \\/([^\\n]*)\\/\\nok(?=\\n|$)`,
  `(?<=^|\\n)([^\\n]*?)${S}\\.\\.\\.${S}System check identified no issues \\(0 silenced\\)\\nok(?=\\n|$)`,
].map((p) => new RegExp(p, 'g'));

export function parseDjango(log: string): StatusMap {
  const map: StatusMap = new Map();
  let previous: string | null = null;
  for (const raw of pyLines(log)) {
    let line = pyStrip(raw);
    if (line.includes(VERSION_DOC)) map.set(VERSION_DOC, 'PASSED');
    if (line.includes(' ... ')) previous = beforeFirst(line, ' ... ');
    for (const suffix of PASS_SUFFIXES) {
      if (!line.endsWith(suffix)) continue;
      // the official parser's one-instance fix for django__django-7188 (migration output on the line)
      if (line.startsWith('Applying sites.0002_alter_domain_unique...test_no_migrations')) {
        line = pyStrip(line.slice(line.indexOf('...') + 3));
      }
      map.set(beforeLast(line, suffix), 'PASSED');
      break;
    }
    if (line.includes(' ... skipped')) map.set(beforeFirst(line, ' ... skipped'), 'SKIPPED');
    if (line.endsWith(' ... FAIL')) map.set(beforeFirst(line, ' ... FAIL'), 'FAILED');
    if (line.startsWith('FAIL:')) {
      const name = pySplit(line)[1];
      if (name !== undefined) map.set(name, 'FAILED');
    }
    if (line.endsWith(' ... ERROR')) map.set(beforeFirst(line, ' ... ERROR'), 'ERROR');
    if (line.startsWith('ERROR:')) {
      const name = pySplit(line)[1];
      if (name !== undefined) map.set(name, 'ERROR');
    }
    if (line.startsWith('ok') && previous !== null) map.set(previous, 'PASSED');
  }
  for (const pattern of INTERRUPTED) for (const m of log.matchAll(pattern)) map.set(m[1]!, 'PASSED');
  return map;
}
