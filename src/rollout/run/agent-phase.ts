/**
 * The agent's part of one sample: a fresh environment at base_commit (with its Python environment
 * installed for an agent that runs code), the agent's run, and the patch it leaves (taken against the
 * environment's set-up commit when there is one). An infrastructure failure of a harness is reported
 * as `failure`, never as a patch to grade. The patch of an agent that runs code is taken from polar's
 * own view of its tree (src/rollout/integrity/view.ts): breaking or removing .git, or making files
 * unreadable, cannot make the sample an error.
 */
import type { Agent, AgentOutcome } from '../agents.ts';
import type { SweInstance } from '../dataset.ts';
import { setUpForAgent } from '../env/layer.ts';
import { takeTreeView } from '../integrity/view.ts';
import { infraFailure } from '../outcome.ts';
import { extractPatch } from '../patch.ts';
import type { Runtime } from '../runtime/types.ts';

/** What the agent's part of a sample reads of its run's options (EvalOptions, src/rollout/run/run.ts). */
export interface AgentPhaseOptions {
  agent: Agent;
  runtime: Runtime;
  agentTimeoutMs: number;
  /** the dataset's label, in the capture's session meta */
  dataset: string;
  meta?: Record<string, string>;
  /** an interrupt: the sample is neither graded nor recorded */
  signal?: AbortSignal;
  /** this run alone cancelled: its harness ended by its own process group */
  cancel?: AbortSignal;
}

export interface AgentPhase {
  agent: AgentOutcome;
  agentMs: number;
  patch: string;
  failure: string | null;
}

/** The agent's part of a sample in its own environment: its outcome and patch; null when interrupted. */
export async function runAgentPhase(
  options: AgentPhaseOptions,
  instance: SweInstance,
  sample: number,
  capturePath: string,
): Promise<AgentPhase | null> {
  const env = await options.runtime.prepare(instance, 'agent');
  let view: Awaited<ReturnType<typeof takeTreeView>> = null;
  try {
    // an agent that runs code gets the environment installed, as the official instance image has it
    if (env.environment && options.agent.runsUntrustedCode) env.patchBase = await setUpForAgent(env);
    if (options.agent.runsUntrustedCode) view = await takeTreeView(env);
    const ta = performance.now();
    const agent = await options.agent.run({
      instance,
      sample,
      env,
      timeoutMs: options.agentTimeoutMs,
      capturePath,
      meta: { dataset: options.dataset, runtime: options.runtime.kind, ...options.meta },
      ...(options.cancel ? { signal: options.cancel } : {}),
    });
    const agentMs = performance.now() - ta;
    if (options.signal?.aborted || options.cancel?.aborted) return null;
    const failure = options.agent.runsUntrustedCode ? infraFailure(agent) : null;
    if (failure !== null) return { agent, agentMs, patch: '', failure };
    if (agent.status === 'error' && !options.agent.runsUntrustedCode)
      return { agent, agentMs, patch: '', failure: agent.error };
    if (agent.patch !== undefined) return { agent, agentMs, patch: agent.patch, failure: null };
    const base = env.patchBase ?? instance.base_commit;
    const extracted = view ? await view.patch(base) : await extractPatch(env, base);
    return { agent, agentMs, patch: extracted.patch, failure: extracted.error ?? null };
  } finally {
    await view?.dispose().catch(() => {});
    await env.dispose().catch(() => {});
  }
}
