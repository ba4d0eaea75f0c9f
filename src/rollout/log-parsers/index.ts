/**
 * Log parsers by name. Polar's short names and the official function names both resolve, the latter
 * as swebench names them (harness/log_parsers/python.py aliases at v4.1.0 and v5.0.1, and the 5.x
 * `log_parser` column of a row): astroid, flask, marshmallow, pvlib, pyvista, sqlfluff and xarray use
 * parse_log_pytest; pydicom, requests and pylint use parse_log_pytest_options; astropy, scikit(-learn)
 * and sphinx use parse_log_pytest_v2.
 */
import { parseDjango } from './django.ts';
import { parseNodeTest } from './node-test.ts';
import { parseMatplotlib, parsePytest, parsePytestOptions, parsePytestV2, parseSeaborn } from './pytest.ts';
import { parseSympy } from './sympy.ts';
import type { LogParser } from './types.ts';

export type { LogParser, ParserVersion, StatusMap, TestStatus } from './types.ts';

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

const OFFICIAL: Record<string, string> = {
  parse_log_pytest: 'pytest',
  parse_log_pytest_options: 'pytest-options',
  parse_log_pytest_v2: 'pytest-v2',
  parse_log_matplotlib: 'matplotlib',
  parse_log_seaborn: 'seaborn',
  parse_log_django: 'django',
  parse_log_sympy: 'sympy',
  parse_log_astroid: 'pytest',
  parse_log_flask: 'pytest',
  parse_log_marshmallow: 'pytest',
  parse_log_pvlib: 'pytest',
  parse_log_pyvista: 'pytest',
  parse_log_sqlfluff: 'pytest',
  parse_log_xarray: 'pytest',
  parse_log_pydicom: 'pytest-options',
  parse_log_requests: 'pytest-options',
  parse_log_pylint: 'pytest-options',
  parse_log_astropy: 'pytest-v2',
  parse_log_scikit: 'pytest-v2',
  parse_log_sphinx: 'pytest-v2',
};

/** polar's earlier names, kept so older rows and runs still resolve */
const ALIASES: Record<string, string> = {
  ...OFFICIAL,
  parse_log_scikit_learn: 'pytest-v2',
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

export function parserNames(): string[] {
  return [...Object.keys(LOG_PARSERS), ...Object.keys(ALIASES)];
}
