/**
 * Django's runner at --verbosity 2: `test_name (module.Class) ... ok|FAIL|ERROR|skipped '...'|expected
 * failure`, a docstring on the line after the name when the test has one, and `FAIL: test_name
 * (module.Class)` headers in the failure details. Ids are the text before ` ... `, as in
 * swebench's parse_log_django.
 */
import { lines, type StatusMap, type TestStatus } from './types.ts';

const NAME = /^\S+ \([\w.]+\)$/;

function outcome(rest: string): TestStatus | null {
  const r = rest.trim();
  if (r === 'ok' || r.startsWith('ok ')) return 'PASSED';
  if (r.startsWith('skipped') || r.startsWith('skip')) return 'SKIPPED';
  if (r === 'FAIL' || r.startsWith('FAIL')) return 'FAILED';
  if (r === 'ERROR' || r.startsWith('ERROR')) return 'ERROR';
  if (r.startsWith('expected failure')) return 'XFAIL';
  if (r.startsWith('unexpected success')) return 'FAILED';
  return null;
}

export function parseDjango(log: string): StatusMap {
  const map: StatusMap = new Map();
  const all = lines(log);
  let previous = '';
  for (const raw of all) {
    const line = raw.trim();
    const header = /^(FAIL|ERROR): (\S+ \([\w.]+\))/.exec(line);
    if (header) {
      map.set(header[2]!, header[1] === 'FAIL' ? 'FAILED' : 'ERROR');
      previous = line;
      continue;
    }
    const at = line.lastIndexOf(' ... ');
    if (at !== -1) {
      let name = line.slice(0, at).trim();
      const status = outcome(line.slice(at + 5));
      if (status) {
        // a test with a docstring prints `name (module.Class)` then `Docstring ... ok`
        if (!NAME.test(name) && NAME.test(previous)) name = previous;
        map.set(name, status);
      }
    }
    if (line !== '') previous = line;
  }
  return map;
}
