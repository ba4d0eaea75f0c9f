/**
 * sympy's bin/test --verbose: one `test_name ok|F|E|f|s|X|Skipped [0.1s]` line per test under a file
 * header, and `___ sympy/x/tests/test_y.py:test_name ___` banners for failures and errors (as in
 * swebench's parse_log_sympy).
 */
import { lines, type StatusMap, type TestStatus } from './types.ts';

const CODES: Record<string, TestStatus> = {
  ok: 'PASSED',
  F: 'FAILED',
  E: 'ERROR',
  f: 'XFAIL',
  X: 'FAILED',
  s: 'SKIPPED',
  Skipped: 'SKIPPED',
  w: 'SKIPPED',
};

export function parseSympy(log: string): StatusMap {
  const map: StatusMap = new Map();
  const banners: Array<{ name: string; kind: TestStatus }> = [];
  let section: TestStatus = 'FAILED';
  for (const raw of lines(log)) {
    const line = raw.trim();
    if (/^_{5,} (Failures|Errors) _{5,}$/.test(line) || /^_+ (FAILURES|ERRORS) _+$/.test(line)) {
      section = /rror/i.test(line) ? 'ERROR' : 'FAILED';
      continue;
    }
    const banner = /^_{3,} \S+\.py:(\w+) _{3,}$/.exec(line);
    if (banner) {
      banners.push({ name: banner[1]!, kind: section });
      continue;
    }
    const result = /^(test_\w+)\s+(ok|F|E|f|X|s|w|Skipped)\b/.exec(line);
    if (result) map.set(result[1]!, CODES[result[2]!]!);
  }
  for (const { name, kind } of banners) map.set(name, kind);
  return map;
}
