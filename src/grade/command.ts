/**
 * `polar grade LOG`: one test log read as the official harness reads it (its parser, its log
 * evaluation and, with a dataset row, its resolution rules), printed as a status map or JSON.
 */
import { readFile } from 'node:fs/promises';
import { EXIT, InputError, UsageError, unreadableInput } from '../errors.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { parseRow, type SweInstance } from '../rollout/dataset.ts';
import { type GradeLogInstance, gradeLog, parserFor } from '../rollout/grade.ts';
import { getLogParser } from '../rollout/log-parsers/index.ts';
import type { ParserVersion, Semantics } from '../rollout/log-parsers/types.ts';
import { END_MARKER, START_MARKER, type TestOutcome } from '../rollout/resolve.ts';

/** `polar grade` flags after parsing (commands/grade.ts); code callers may leave semantics to its default. */
export interface GradeCliOptions {
  repo?: string;
  version?: string;
  logParser?: string;
  instance?: string;
  json?: boolean;
  semantics?: Semantics;
  officialVersion?: ParserVersion;
}

export interface GradeLogReport {
  log: string;
  repo: string;
  version: string;
  parser: string;
  /** the official version whose rules were applied */
  official_version: ParserVersion;
  semantics: Semantics;
  /** false: the file had no test markers and was read whole */
  markers: boolean;
  /** false: the official harness would find no usable test run in this log */
  found: boolean;
  reason: string | null;
  test_exit_code: number | null;
  tests: Record<string, string>;
  instance_id?: string;
  FAIL_TO_PASS?: TestOutcome;
  PASS_TO_PASS?: TestOutcome;
  resolved?: boolean;
}

async function readInstance(path: string): Promise<SweInstance> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw unreadableInput(path, error, { what: '--instance' });
  }
  let rows: unknown[];
  try {
    const trimmed = text.trim();
    const parsed = trimmed.startsWith('{') && !trimmed.includes('\n{') ? JSON.parse(trimmed) : null;
    rows =
      parsed !== null
        ? [parsed]
        : trimmed.startsWith('[')
          ? (JSON.parse(trimmed) as unknown[])
          : trimmed
              .split('\n')
              .filter(Boolean)
              .map((l) => JSON.parse(l));
  } catch (error) {
    throw new InputError(path, undefined, undefined, `not JSON: ${(error as Error).message}`);
  }
  if (rows.length !== 1) {
    throw new InputError(path, undefined, undefined, `${rows.length} rows`, 'give one dataset row');
  }
  return parseRow(path, undefined, rows[0]);
}

/** Parses (and with an instance, grades) one log file. */
export async function gradeLogFile(path: string, o: GradeCliOptions): Promise<GradeLogReport> {
  let content: string;
  try {
    content = await readFile(path, 'utf8');
  } catch (error) {
    throw unreadableInput(path, error, {
      hint: 'give a test log: an eval log (logs/<instance>.log) or a bare runner output',
    });
  }
  const instance = o.instance ? await readInstance(o.instance) : null;
  const repo = o.repo ?? instance?.repo;
  if (!repo) throw new UsageError('give --repo OWNER/NAME (or --instance ROW.json)');
  if (instance && o.repo && o.repo !== instance.repo) {
    throw new UsageError(`--repo ${o.repo} differs from the row's repo ${instance.repo} (--instance)`);
  }
  const semantics = o.semantics ?? DEFAULTS.gradeSemantics.value;
  const row: GradeLogInstance = instance
    ? { ...instance, ...(o.version ? { version: o.version } : {}) }
    : { repo, version: o.version ?? '', FAIL_TO_PASS: [], PASS_TO_PASS: [] };
  if (o.logParser && !getLogParser(o.logParser)) {
    throw new UsageError(`--log-parser ${o.logParser}: unknown`, 'for example parse_log_pytest or django');
  }
  const parser = o.logParser ?? parserFor(row);
  if (typeof parser !== 'string') throw new UsageError(parser.error, 'name one with --log-parser');
  // a bare runner output (no markers) is read whole, as the text between the markers
  const markers = content.includes(START_MARKER);
  const text = markers ? content : `${START_MARKER}\n${content}\n${END_MARKER}\n`;
  const g = gradeLog(row, text, {
    parser,
    semantics,
    ...(o.officialVersion ? { version: o.officialVersion } : {}),
  });
  if ('error' in g) throw new UsageError(g.error);
  return {
    log: path,
    repo,
    version: row.version ?? '',
    parser: g.parser,
    official_version: g.rules.version,
    semantics,
    markers,
    found: g.found,
    reason: instance ? g.reason : g.found ? null : g.reason,
    test_exit_code: g.test_exit_code,
    tests: Object.fromEntries(g.tests),
    ...(instance
      ? {
          instance_id: instance.instance_id,
          FAIL_TO_PASS: g.fail_to_pass,
          PASS_TO_PASS: g.pass_to_pass,
          resolved: g.resolved,
        }
      : {}),
  };
}

export function formatGradeReport(r: GradeLogReport): string {
  const out: string[] = [];
  const counts = new Map<string, number>();
  for (const s of Object.values(r.tests)) counts.set(s, (counts.get(s) ?? 0) + 1);
  out.push(
    `${r.log}: parser ${r.parser}, official v${r.official_version} rules${r.semantics === 'polar' ? ' + polar guards' : ''}${r.markers ? '' : ' (no markers: read whole)'}`,
  );
  out.push(
    `${Object.keys(r.tests).length} tests${[...counts].map(([s, n]) => `, ${n} ${s}`).join('')}${r.test_exit_code === null ? '' : `; test exit code ${r.test_exit_code}`}`,
  );
  if (!r.found) out.push(`no usable test run: ${r.reason}`);
  for (const [id, status] of Object.entries(r.tests)) out.push(`${status.padEnd(8)} ${id}`);
  if (r.resolved !== undefined) {
    const line = (name: string, o: TestOutcome) =>
      `${name}: ${o.passed.length} passed, ${o.failed.length} failed${o.uncounted.length ? `, ${o.uncounted.length} not counted` : ''}${o.failed.length ? ` (${o.failed.slice(0, 5).join(', ')}${o.failed.length > 5 ? ', ...' : ''})` : ''}`;
    out.push('');
    out.push(line('FAIL_TO_PASS', r.FAIL_TO_PASS!));
    out.push(line('PASS_TO_PASS', r.PASS_TO_PASS!));
    out.push(
      `${r.instance_id}: ${r.resolved ? 'resolved' : `not resolved${r.reason ? ` (${r.reason})` : ''}`}`,
    );
  }
  return out.join('\n');
}

export async function gradeCommand(log: string, o: GradeCliOptions): Promise<number> {
  const report = await gradeLogFile(log, o);
  process.stdout.write(o.json ? `${JSON.stringify(report, null, 2)}\n` : `${formatGradeReport(report)}\n`);
  return EXIT.ok;
}
