/**
 * `polar eval --regrade --out DIR`: grades every test log of an earlier run again, in place, with the
 * parsers and rules of this polar (after a parser fix, without running agents or tests again), then
 * rewrites results.jsonl and report.json. Samples whose outcome did not come from a test log (an
 * error, an empty patch, a patch that did not apply, a test timeout, the official grader) keep their
 * line. A sample graded through the integrity layers is graded from the report its run saved
 * (logs/<key>.integrity.json), not from the test output. Capture files are append-only and keep the
 * grading record they had.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { EXIT, UsageError } from '../errors.ts';
import { loadDataset, type SweInstance } from '../rollout/dataset.ts';
import { gradeLog } from '../rollout/grade.ts';
import { regradeRecord } from '../rollout/integrity/grade-run.ts';
import { EVAL_FILES } from '../rollout/run/files.ts';
import {
  buildReport,
  formatReport,
  type Report,
  type ResultLine,
  reportSchema,
} from '../rollout/run/report.ts';
import { readResults, sampleKey } from '../rollout/run/results.ts';
import type { Grader } from '../rollout/verifier.ts';
import { log } from '../util/log.ts';
import { writeAtomic } from '../util/private-files.ts';
import { type Lenient, readLenient } from '../util/zod.ts';

export interface RegradeOptions {
  out: string;
  /** the dataset rows of the run (FAIL_TO_PASS / PASS_TO_PASS) */
  instances: SweInstance[];
  /** label for the report when the run has no report.json */
  dataset: string;
}

export interface RegradeOutcome {
  report: Report;
  results: ResultLine[];
  /** samples graded again from their log */
  regraded: number;
  /** of those, samples whose resolved flag changed */
  changed: number;
  /** samples kept as they were (no test log, or an outcome that did not come from one) */
  kept: number;
}

function fromLog(r: ResultLine): boolean {
  if (r.status !== 'resolved' && r.status !== 'unresolved') return false;
  if (r.tampering?.rejected) return false; // graded 0 without running the tests
  if (r.grader === 'swebench' || r.grader === 'verifier' || r.grader === 'judge') return false; // no test log behind it
  if (r.rewards !== undefined) return false; // a combined reward (--reward, a judge): kept as the run made it
  return r.reason !== 'patch does not apply' && !String(r.reason ?? '').startsWith('tests timed out');
}

/** The labels of the report being replaced (what of it can be read; a missing or broken one gives none). */
async function previousReport(path: string): Promise<Lenient<Report>> {
  if (!existsSync(path)) return {};
  let value: unknown;
  try {
    value = JSON.parse(await readFile(path, 'utf8'));
  } catch (error) {
    log.warn(`${path}: not readable as JSON (${(error as Error).message}); its labels are not kept`);
    return {};
  }
  const { data, problems } = readLenient(reportSchema, value);
  for (const p of problems) log.warn(`${path}: ${p}`);
  return data ?? {};
}

export async function regradeRun(o: RegradeOptions): Promise<RegradeOutcome> {
  const out = resolve(o.out);
  const resultsPath = join(out, EVAL_FILES.results);
  if (!existsSync(resultsPath)) {
    throw new UsageError(
      `--out ${o.out}: no results.jsonl to re-grade`,
      'give the folder of an earlier polar eval',
    );
  }
  const byId = new Map(o.instances.map((i) => [i.instance_id, i]));
  const results = [...(await readResults(resultsPath)).values()];
  let regraded = 0;
  let changed = 0;
  let missing = 0;
  const next: ResultLine[] = [];
  for (const r of results) {
    const instance = byId.get(r.instance_id);
    const logFile = join(out, EVAL_FILES.logs, `${sampleKey(r.instance_id, r.sample)}.test.log`);
    if (!fromLog(r) || !instance || !existsSync(logFile)) {
      if (fromLog(r)) missing++;
      next.push(r);
      continue;
    }
    // a run graded through the integrity layers: its saved report decides, not the test output
    const record = join(out, EVAL_FILES.logs, `${sampleKey(r.instance_id, r.sample)}.integrity.json`);
    const text = await readFile(logFile, 'utf8');
    const g = existsSync(record)
      ? regradeRecord(instance, text, await readFile(record, 'utf8'))
      : gradeLog(instance, text);
    const line: ResultLine = { ...r, regraded_at: new Date().toISOString() };
    if ('error' in g) {
      // an ungradable log is an infrastructure failure: no reward (null), never a 0
      Object.assign(line, { status: 'error', resolved: false, reward: null, reason: g.error });
    } else {
      Object.assign(line, {
        status: g.resolved ? 'resolved' : 'unresolved',
        resolved: g.resolved,
        reward: g.resolved ? 1 : 0,
        reason: g.reason,
        // the log says nothing of the patch: a tampering flag stays
        suspicious: g.suspicious || Boolean(r.tampering),
        fail_to_pass: g.fail_to_pass,
        pass_to_pass: g.pass_to_pass,
        test_exit_code: g.test_exit_code,
        official_version: g.rules.version,
      });
    }
    regraded++;
    if (line.resolved !== r.resolved) changed++;
    next.push(line);
  }
  if (missing > 0) log.warn(`${missing} samples kept as they were: no test log or no dataset row for them`);
  await writeAtomic(resultsPath, next.map((r) => `${JSON.stringify(r)}\n`).join(''));
  const previous = await previousReport(join(out, EVAL_FILES.report));
  const ids = [...new Set(next.map((r) => r.instance_id))];
  const samples = Math.max(previous.samples ?? 0, ...next.map((r) => r.sample + 1));
  const report = buildReport(next, {
    dataset: previous.dataset ?? o.dataset,
    agent: previous.agent ?? 'unknown',
    model: previous.model ?? 'unknown',
    runtime: previous.runtime ?? 'unknown',
    instances: ids,
    samples,
  });
  await writeAtomic(join(out, EVAL_FILES.report), `${JSON.stringify(report, null, 2)}\n`);
  return { report, results: next, regraded, changed, kept: next.length - regraded };
}

/**
 * The CLI side of `polar eval --regrade`: loads the dataset, re-grades, prints the report (on stdout, or
 * through `print`: a caller that wants the text, such as a test, need not replace process.stdout.write).
 */
export async function regradeCommand(
  o: {
    out: string;
    dataset: string;
    split?: string;
    /** the run's --grader: with a verifier command the rows need no FAIL_TO_PASS (as when it ran) */
    grader?: Grader;
    json?: boolean;
  },
  print: (text: string) => void = (text) => process.stdout.write(text),
): Promise<number> {
  const instances = await loadDataset(o.dataset, {
    split: o.split,
    verifier: o.grader?.kind === 'verifier' || o.grader?.kind === 'judge',
  });
  const outcome = await regradeRun({ out: o.out, instances, dataset: o.dataset });
  log.info(
    `re-graded ${outcome.regraded} samples from their logs (${outcome.changed} changed), kept ${outcome.kept}`,
  );
  print(o.json ? `${JSON.stringify(outcome.report, null, 2)}\n` : `${formatReport(outcome.report)}\n`);
  log.info(`rewrote ${resolve(o.out)}/{results.jsonl,report.json}`);
  return EXIT.ok;
}
