/** The flags of `polar eval` after parsing (commands/eval.ts), typed once for the command and its parts. */
import type { HarnessName } from '../harnesses/types.ts';
import type { BackendFlags } from '../options/backend.ts';
import type { ClusterChoice } from '../options/parsers.ts';
import type { ReportFlags } from '../options/report.ts';
import type { AgentName } from '../rollout/agent-names.ts';
import type { RolloutFlags } from '../rollout/flags.ts';
import type { JudgeFlags } from '../rollout/judge/setup.ts';
import type { Grader } from '../rollout/verifier.ts';

/** `polar eval` flags after parsing (commands/eval.ts): numbers are numbers, timeouts milliseconds. */
export interface EvalFlags extends BackendFlags, RolloutFlags, JudgeFlags, ReportFlags {
  dataset: string;
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
  rejectTestTampering?: boolean;
  keepEnvs?: boolean;
  quiet?: boolean;
  regrade?: boolean;
  /** hidden: only this sample index of each instance (a cluster node's share of a run) */
  sampleIndex?: number;
  /** hidden: where this share of a cluster run runs (a Slurm shard's node and job): each result's `cluster` */
  clusterTag?: Record<string, unknown>;
  /** hidden: more session meta for every capture (polar loop --cluster: the policy's step, as a local loop records it) */
  sessionMeta?: Record<string, unknown>;
  /** --cluster ray[=ADDRESS] | slurm: the samples fan out over a cluster (src/rollout/executors/) */
  cluster?: ClusterChoice;
  /** per sample on the cluster */
  clusterCpus: number;
  /** bytes per sample on the cluster */
  clusterMemory: number;
  /** a folder every node and this machine see */
  clusterShared?: string;
  clusterRetries: number;
  /** how a node starts polar (default: this polar) */
  clusterPolar?: string;
  /** slurm: array tasks (shards) */
  clusterShards?: number;
  /** slurm: more sbatch arguments (repeatable) */
  sbatchArg?: string[];
  /** --merge DIR...: shard folders merged into --out */
  merge?: string[];
}
