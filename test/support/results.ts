/**
 * A results.jsonl line (src/rollout/run/report.ts ResultLine) made by hand, for the tests that count over results
 * (rollout health, tracker figures, the asynchronous loop's groups): a reward of 1 or more is resolved, a
 * null reward an infrastructure error whose model calls all failed; the test gives the calls a sample made
 * and the seconds it took.
 */
import type { ResultLine } from '../../src/rollout/run/report.ts';

export function resultLine(
  task: string,
  sample: number,
  reward: number | null,
  o: { calls: number; seconds: number },
  extra: Partial<ResultLine> = {},
): ResultLine {
  return {
    instance_id: task,
    repo: 'o/r',
    sample,
    status: reward === null ? 'error' : reward >= 1 ? 'resolved' : 'unresolved',
    resolved: reward !== null && reward >= 1,
    reward,
    reason: reward === null ? `no model answer: all ${o.calls} calls to the backend failed` : null,
    suspicious: false,
    durations_ms: { total: 1000 * o.seconds, agent: 0, tests: 0, overhead: 0 },
    agent: { calls: o.calls, failed_calls: reward === null ? o.calls : 0 },
    ...extra,
  } as ResultLine;
}
