/** Log parsers by name, and the name each SWE-bench repository uses. */
import { parseDjango } from './django.ts';
import { parseNodeTest } from './node-test.ts';
import { parseMatplotlib, parsePytest, parsePytestOptions, parsePytestV2, parseSeaborn } from './pytest.ts';
import { parseSympy } from './sympy.ts';
import type { LogParser } from './types.ts';

export type { LogParser, StatusMap, TestStatus } from './types.ts';

export const LOG_PARSERS: Record<string, LogParser> = {
  pytest: parsePytest,
  'pytest-options': parsePytestOptions,
  'pytest-v2': parsePytestV2,
  matplotlib: parseMatplotlib,
  seaborn: parseSeaborn,
  django: parseDjango,
  sympy: parseSympy,
  'node-test': parseNodeTest,
};

/** swebench 5.x `log_parser` column values -> polar's names */
const ALIASES: Record<string, string> = {
  parse_log_pytest: 'pytest',
  parse_log_pytest_options: 'pytest-options',
  parse_log_pytest_v2: 'pytest-v2',
  parse_log_matplotlib: 'matplotlib',
  parse_log_seaborn: 'seaborn',
  parse_log_django: 'django',
  parse_log_sympy: 'sympy',
  parse_log_sphinx: 'pytest',
  parse_log_astropy: 'pytest-v2',
  parse_log_xarray: 'pytest',
  parse_log_scikit_learn: 'pytest',
  parse_log_requests: 'pytest-options',
  parse_log_pylint: 'pytest-options',
  parse_log_flask: 'pytest',
  node: 'node-test',
  'node-tap': 'node-test',
};

export function resolveParserName(name: string): string | null {
  const key = ALIASES[name] ?? name;
  return key in LOG_PARSERS ? key : null;
}

export function getLogParser(name: string): LogParser | null {
  const key = resolveParserName(name);
  return key === null ? null : LOG_PARSERS[key]!;
}
