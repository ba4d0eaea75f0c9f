/**
 * The structured reports of a graded test run: written by a reporter polar ships into the run (a pytest
 * plugin loaded with `-p`, a node:test reporter module), to a file outside the repository whose path is
 * drawn at random per run, and read back after the runner has exited. Not the test process's stdout,
 * which the code under test writes as freely as the runner does (reward-integrity.md A2).
 *
 * What this does not make safe: the code under test runs in the same process as pytest's reporter (and
 * in node:test's worker processes, whose events reach the reporter), so an in-process hook can still
 * change what a test reports; it can also read the report's path from its environment or arguments.
 * The canaries (canary.ts) are what catches that. A report that is missing or cannot be read is no pass.
 */

/** The pytest plugin (Python 3.5+, pytest 3.x to 9.x: only hooks that every one of those has). */
export const PYTEST_PLUGIN = `import json, os

_path = os.environ.get("POLAR_TEST_REPORT")
_tests = []
_collect_errors = []
_state = {"collected": None}


def pytest_configure(config):
    # set for this run only: test code that starts pytest again (pytester) sees the environment as it was
    os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    os.environ.pop("POLAR_TEST_REPORT", None)


def pytest_collectreport(report):
    if report.failed:
        _collect_errors.append(report.nodeid)


def pytest_collection_finish(session):
    _state["collected"] = len(session.items)


def pytest_runtest_logreport(report):
    entry = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome}
    if hasattr(report, "wasxfail"):
        entry["xfail"] = True
    _tests.append(entry)


def pytest_sessionfinish(session, exitstatus):
    if not _path:
        return
    import pytest
    data = {
        "format": "polar-pytest/1",
        "pytest": getattr(pytest, "__version__", None),
        "collected": _state["collected"],
        "exitstatus": int(exitstatus),
        "collect_errors": _collect_errors,
        "tests": _tests,
    }
    with open(_path + ".part", "w") as f:
        json.dump(data, f)
    os.replace(_path + ".part", _path)
`;

/**
 * The node:test reporter: ids as the TAP reporter names tests (`parent > child`, the node-test parser's
 * form), each test's outcome and its skip/todo directive; the summary counts node prints.
 */
export const NODE_REPORTER = `export default async function* polarReport(source) {
  const stack = [];
  const tests = [];
  const counts = {};
  for await (const event of source) {
    const d = event.data || {};
    if (event.type === 'test:start') {
      stack.length = d.nesting;
      stack[d.nesting] = d.name;
    } else if (event.type === 'test:pass' || event.type === 'test:fail') {
      tests.push({
        id: [...stack.slice(0, d.nesting), d.name].join(' > '),
        file: d.file || null,
        outcome: event.type === 'test:pass' ? 'pass' : 'fail',
        skip: d.skip !== undefined && d.skip !== false,
        todo: d.todo !== undefined && d.todo !== false,
      });
    } else if (event.type === 'test:diagnostic' && typeof d.message === 'string') {
      const m = /^(tests|suites|pass|fail|cancelled|skipped|todo) (\\d+)$/.exec(d.message);
      if (m) counts[m[1]] = Number(m[2]);
    }
  }
  yield JSON.stringify({ format: 'polar-node-test/1', node: process.version, counts, tests });
}
`;

export type ReportStatus = 'PASSED' | 'FAILED' | 'ERROR' | 'SKIPPED' | 'XFAIL' | 'XPASS';

/** A report as polar reads it, whichever runner wrote it. */
export interface RunnerReport {
  runner: 'pytest' | 'node-test';
  /** test id (pytest: the node id; node: `parent > child`) -> status, in the runner's order */
  tests: Map<string, ReportStatus>;
  /** ids of collection errors (pytest) or of files that failed to load (node) */
  loadErrors: string[];
  /** the exit status the runner reported from inside the process (pytest), or null */
  exitstatus: number | null;
  /** tests collected (pytest) or counted (node), or null */
  collected: number | null;
}

// how pytest -rA ends a test's summary: a later line wins, so a failure in any phase outranks a pass
const RANK: Record<ReportStatus, number> = { PASSED: 0, SKIPPED: 1, XFAIL: 2, XPASS: 3, ERROR: 4, FAILED: 5 };

function phaseStatus(entry: { when?: unknown; outcome?: unknown; xfail?: unknown }): ReportStatus | null {
  const xfail = entry.xfail === true;
  if (entry.outcome === 'passed') return entry.when === 'call' ? (xfail ? 'XPASS' : 'PASSED') : null;
  if (entry.outcome === 'skipped') return xfail ? 'XFAIL' : 'SKIPPED';
  if (entry.outcome === 'failed') return entry.when === 'call' ? 'FAILED' : 'ERROR';
  return null;
}

const object = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads a report of polar's pytest plugin; a string says why it cannot be read. */
export function readPytestReport(text: string): RunnerReport | string {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return 'the report is not JSON (cut short, or written by something else)';
  }
  if (!object(data) || data.format !== 'polar-pytest/1' || !Array.isArray(data.tests))
    return 'the report is not one polar wrote';
  const tests = new Map<string, ReportStatus>();
  for (const entry of data.tests) {
    if (!object(entry) || typeof entry.nodeid !== 'string')
      return 'the report holds an entry that is not a test';
    const status = phaseStatus(entry);
    if (status === null) continue;
    const before = tests.get(entry.nodeid);
    if (before === undefined || RANK[status] > RANK[before]) tests.set(entry.nodeid, status);
  }
  return {
    runner: 'pytest',
    tests,
    loadErrors: Array.isArray(data.collect_errors) ? data.collect_errors.map(String) : [],
    exitstatus: typeof data.exitstatus === 'number' ? data.exitstatus : null,
    collected: typeof data.collected === 'number' ? data.collected : null,
  };
}

/** Reads a report of polar's node:test reporter (statuses as the node-test parser gives them). */
export function readNodeReport(text: string): RunnerReport | string {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return 'the report is not JSON (cut short, or written by something else)';
  }
  if (!object(data) || data.format !== 'polar-node-test/1' || !Array.isArray(data.tests))
    return 'the report is not one polar wrote';
  const tests = new Map<string, ReportStatus>();
  const loadErrors: string[] = [];
  for (const t of data.tests) {
    if (!object(t) || typeof t.id !== 'string') return 'the report holds an entry that is not a test';
    const fail = t.outcome === 'fail';
    const status: ReportStatus = t.skip
      ? 'SKIPPED'
      : t.todo
        ? fail
          ? 'XFAIL'
          : 'PASSED'
        : fail
          ? 'FAILED'
          : 'PASSED';
    // a file that does not load is reported as a failed test named by the file's path
    if (fail && typeof t.file === 'string' && t.id === t.file) loadErrors.push(t.id);
    tests.set(t.id, status);
  }
  const counts = object(data.counts) ? data.counts : {};
  return {
    runner: 'node-test',
    tests,
    loadErrors,
    exitstatus: null,
    collected: typeof counts.tests === 'number' ? counts.tests : null,
  };
}
