/** The agents `polar eval --agent` knows: the built-in ones, then every harness (light: the CLI imports it). */
import { UsageError } from '../errors.ts';
import { HARNESS_NAMES, type HarnessName } from '../harnesses/types.ts';

export const BUILTIN_AGENTS = ['gold', 'empty', 'predictions'] as const;
export const AGENT_NAMES = [...BUILTIN_AGENTS, ...HARNESS_NAMES] as const;
export type AgentName = (typeof AGENT_NAMES)[number];

export function isHarness(name: AgentName): name is HarnessName {
  return (HARNESS_NAMES as readonly string[]).includes(name);
}

/**
 * The agent of `polar eval` or `polar loop`: --agent, or --harness, its old name for a harness (still
 * works for a release, with the one warning both commands give). Loop's --agent takes harnesses only
 * (it trains on their calls), so its agent is a harness.
 */
export function agentOf<A extends AgentName>(
  f: { agent?: A; harness?: HarnessName },
  command: 'eval' | 'loop',
  warn: (message: string) => void,
): A | HarnessName {
  if (f.agent && f.harness && f.agent !== f.harness) {
    throw new UsageError(
      `--agent ${f.agent} and --harness ${f.harness} name two different agents`,
      isHarness(f.agent) ? 'give one of them' : `drop --harness: --agent ${f.agent} runs no harness`,
    );
  }
  if (f.harness) warn(`--harness of polar ${command} is now --agent (the old name goes in the next release)`);
  const agent = f.agent ?? f.harness;
  if (!agent)
    throw new UsageError(
      command === 'eval'
        ? `give --agent: a harness (${HARNESS_NAMES.join('|')}) or ${BUILTIN_AGENTS.join('|')}`
        : `give --agent: the harness the rollouts run (${HARNESS_NAMES.join('|')})`,
    );
  return agent;
}
