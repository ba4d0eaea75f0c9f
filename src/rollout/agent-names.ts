/** The agents `polar eval --agent` knows: the built-in ones, then every harness (light: the CLI imports it). */
import { HARNESS_NAMES, type HarnessName } from '../harnesses/types.ts';

export const BUILTIN_AGENTS = ['gold', 'empty', 'predictions'] as const;
export const AGENT_NAMES = [...BUILTIN_AGENTS, ...HARNESS_NAMES] as const;
export type AgentName = (typeof AGENT_NAMES)[number];

export function isHarness(name: AgentName): name is HarnessName {
  return (HARNESS_NAMES as readonly string[]).includes(name);
}
