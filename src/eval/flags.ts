/** The flags of `polar eval` after parsing (commands/eval.ts), typed once for the command and its parts. */

import type { HarnessName } from '../harnesses/types.ts';
import type { BackendFlags } from '../options/backend.ts';
import type { GivenOptions } from '../options/config.ts';
import type { ReportFlags } from '../options/report.ts';
import type { AgentName } from '../rollout/agent-names.ts';
import type { ClusterFlags, RolloutFlags } from '../rollout/flags.ts';
import type { JudgeFlags } from '../rollout/judge/setup.ts';
import type { Grader } from '../rollout/verifier.ts';

/** `polar eval` flags after parsing (commands/eval.ts): numbers are numbers, timeouts milliseconds. */
export interface EvalFlags extends BackendFlags, RolloutFlags, ClusterFlags, JudgeFlags, ReportFlags {
  dataset: string;
  /** the options given (command line and --config), by long flag name: what the run records for --config */
  given?: GivenOptions;
  split: string;
  agent?: AgentName;
  /** --harness, the old name of --agent for a harness (deprecated) */
  harness?: HarnessName;
  agentCmd?: string;
  predictions?: string;
  promptTemplate?: string;
  samples: number;
  concurrency: number;
  out: string;
  instances?: string[];
  limit?: number;
  shard?: { index: number; count: number };
  resume?: boolean;
  overwrite?: boolean;
  /** polar, swebench or a verifier command (src/rollout/verifier.ts) */
  grader: Grader;
  json?: boolean;
  failUnder?: number;
  gradeEmptyPatches?: boolean;
  /** undefined: DEFAULTS.evalRejectsTampering (the official outcome kept) */
  rejectTestTampering?: boolean;
  keepEnvs?: boolean;
  quiet?: boolean;
  regrade?: boolean;
  /** --merge DIR...: shard folders merged into --out */
  merge?: string[];
}
