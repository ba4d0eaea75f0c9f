/**
 * The one rule eval, loop and gym share for what a sample's outcome means: an infrastructure failure
 * (the harness never got a model answer: the backend is down, every call failed, the harness could not
 * start) is an `error` with no reward, never a graded 0 that GRPO would train on. `polar eval --resume`
 * runs errored samples again; polar gym answers them as a failed rollout (`_ng_failure_class`, reward null).
 * A limit the sandbox enforces (memory, processes, disk, time) that ends a harness which had got model
 * answers is the model's doing: graded like any other end, with `agent.limit` saying which one.
 */
import { plural } from '../util/plural.ts';

/** What the agent reports about its run (AgentOutcome's counting fields). */
export interface AgentRunFacts {
  status: 'completed' | 'error' | 'timeout' | 'interrupted';
  /** model calls recorded */
  calls: number;
  /** of those, the ones that failed (no model answer) */
  failedCalls?: number;
  /** of those, the ones the harness hung up on or polar cut (no model answer, but no backend failure) */
  hungUpCalls?: number;
  /** of those, calls a weight update of polar loop cut after part of the answer had reached the harness */
  weightUpdateCutCalls?: number;
  error: string | null;
  /** the limit that ended the run, when one did */
  limit?: string | null;
}

/**
 * Why a harness run is an infrastructure failure, or null when its result can be graded. A harness
 * that made calls and got at least one answer is graded whatever its exit (a crash after editing
 * files is the model's doing); one whose every call failed, or that made none and did not complete,
 * never saw the model.
 */
export function infraFailure(agent: AgentRunFacts): string | null {
  const failed = agent.failedCalls ?? 0;
  const hungUp = agent.hungUpCalls ?? 0;
  const why = agent.error ? ` (${agent.error})` : '';
  const cut = agent.weightUpdateCutCalls ?? 0;
  // what the harness did after polar cut one of its answers is not the model's doing, however it went on
  if (cut > 0) {
    return `a weight update cut ${plural(cut, 'model answer')} mid-stream (--weight-sync-pause abort): the run is polar's doing from there, not the model's; --weight-sync-pause wait or keep never cuts an answer`;
  }
  if (agent.calls > 0 && failed >= agent.calls) {
    return `no model answer: all ${plural(agent.calls, 'call')} to the backend failed${why}`;
  }
  if (agent.calls > 0 && failed + hungUp >= agent.calls) {
    return `no model answer: of ${plural(agent.calls, 'call')}, ${failed} failed and ${hungUp} ended before an answer (the harness hung up, or polar cut it)${why}`;
  }
  if (agent.calls === 0 && agent.status !== 'completed') {
    // a limit hit before the first call is the set-up's (a limit too small for the harness), not the model's
    const limit = agent.limit
      ? `; it hit ${agent.limit} before its first call: raise the limit (--memory-limit, --pids-limit, --disk-limit, --agent-timeout)`
      : '';
    return `no model answer: the harness made no model call and ended ${agent.status}${agent.error ? ` (${agent.error})` : ''}${limit}`;
  }
  return null;
}

/** A result line that must not become a reward (eval's `error` status): gym answers it as a failed rollout. */
export function isInfraFailure(line: { status: string }): boolean {
  return line.status === 'error';
}
