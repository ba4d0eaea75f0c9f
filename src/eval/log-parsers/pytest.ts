/**
 * pytest `-rA` summary parsers. The ids in SWE-bench's FAIL_TO_PASS / PASS_TO_PASS lists were produced
 * by the harness's own parsers (swebench/harness/log_parsers/python.py: parse_log_pytest,
 * parse_log_pytest_options, parse_log_pytest_v2, parse_log_matplotlib, parse_log_seaborn), so each
 * variant here reproduces how its original splits a line, quirks included: a different split gives ids
 * that never match the dataset.
 */
import { lines, type StatusMap, TEST_STATUSES, type TestStatus } from './types.ts';

function leadingStatus(line: string): TestStatus | null {
  for (const status of TEST_STATUSES) if (line.startsWith(status)) return status;
  return null;
}

/** `PASSED tests/test_x.py::test_a` / `FAILED tests/test_x.py::test_b - assert 1 == 2` */
export function parsePytest(log: string): StatusMap {
  const map: StatusMap = new Map();
  for (let line of lines(log)) {
    const status = leadingStatus(line);
    if (!status) continue;
    if (status === 'FAILED') line = line.replace(' - ', ' ');
    const parts = line.trim().split(/\s+/);
    if (parts.length <= 1 || parts[0] !== status) continue;
    map.set(parts[1]!, status);
  }
  return map;
}

/**
 * Like parsePytest, but a parametrised id whose options contain spaces (`test_x[a b]`) is kept whole
 * (psf/requests, pylint).
 */
export function parsePytestOptions(log: string): StatusMap {
  const map: StatusMap = new Map();
  for (let line of lines(log)) {
    const status = leadingStatus(line);
    if (!status) continue;
    line = line.slice(status.length).trim();
    if (line === '') continue;
    let name: string;
    const bracket = line.indexOf('[');
    const firstSpace = line.search(/\s/);
    if (bracket !== -1 && (firstSpace === -1 || bracket < firstSpace)) {
      const close = line.lastIndexOf(']');
      name = close > bracket ? line.slice(0, close + 1) : line.split(/\s+/)[0]!;
    } else {
      name = line.split(/\s+/)[0]!;
    }
    map.set(name, status);
  }
  return map;
}

/** astropy: colour codes stripped, and verbose `path::test PASSED [ 10%]` lines as well as the summary. */
export function parsePytestV2(log: string): StatusMap {
  const map: StatusMap = new Map();
  for (let line of lines(log)) {
    line = line.replace(/\[\s*\d+%\]\s*$/, '').trimEnd();
    const status = leadingStatus(line);
    if (status) {
      if (status === 'FAILED') line = line.replace(' - ', ' ');
      const parts = line.trim().split(/\s+/);
      if (parts.length > 1 && parts[0] === status) map.set(parts[1]!, status);
      continue;
    }
    const verbose = /^(\S+::\S+)\s+(PASSED|FAILED|SKIPPED|ERROR|XFAIL)$/.exec(line.trim());
    if (verbose) map.set(verbose[1]!, verbose[2] as TestStatus);
  }
  return map;
}

/** matplotlib: enum reprs in parametrised ids are printed by value in the dataset. */
export function parseMatplotlib(log: string): StatusMap {
  const normalized = log.replace(/MouseButton\.LEFT/g, '1').replace(/MouseButton\.RIGHT/g, '3');
  return parsePytest(normalized);
}

/** seaborn (`pytest --no-header -rA`): summary lines plus `path::test PASSED` progress lines. */
export function parseSeaborn(log: string): StatusMap {
  const map: StatusMap = new Map();
  for (const line of lines(log)) {
    const status = leadingStatus(line);
    if (status) {
      const parts = line.trim().split(/\s+/);
      if (parts.length > 1) map.set(parts[1]!, status);
      continue;
    }
    const trailing = /^(\S+::\S+)\s+(PASSED|FAILED|SKIPPED|ERROR|XFAIL)\b/.exec(line.trim());
    if (trailing) map.set(trailing[1]!, trailing[2] as TestStatus);
  }
  return map;
}
