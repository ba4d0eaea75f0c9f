/**
 * What polar loop runs with (src/loop/command.ts makes it from the flags) and what a step knows as it
 * runs, shared by the strict loop (loop.ts), the asynchronous one (async-loop.ts) and their phases.
 */
import type { Backend, BackendOptions } from '../backends/types.ts';
import type { GivenOptions } from '../options/config.ts';
import type { OverduePolicy, OverlongMode, PauseMode, WeightSyncChoice } from '../options/defaults.ts';
import type { ReportSetup } from '../options/report.ts';
import type { SweInstance } from '../rollout/dataset.ts';
import type { RewardSetup } from '../rollout/judge/setup.ts';
import type { RuntimeSetup } from '../rollout/runtime/create.ts';
import type { AgentSetup } from '../rollout/setup.ts';
import type { NodesTraining } from '../train/cluster/train.ts';
import type { Reporter } from '../train/tracking/reporter.ts';
import type { LoopCluster } from './cluster.ts';
import type { Publisher } from './publish.ts';

export interface LoopOptions {
  trainSet: string;
  evalSet?: string;
  /** the harness agent of every evaluation (its backend is `backend`): the setup polar eval makes */
  agent: Omit<AgentSetup, 'backend'>;
  /** where the samples run: the same runtime setup as polar eval and polar gym */
  runtime: RuntimeSetup;
  backend: BackendOptions;
  /** the checkpoint (or model id) training starts from; the backend serves the same weights */
  trainModel: string;
  groupSize: number;
  tasksPerStep: number;
  steps: number;
  evalEvery: number;
  /**
   * --max-staleness K: 0 alternates strictly (rollouts, build, train, publish); K >= 1 keeps rollouts
   * running while a step trains, a sample trained at most K versions after the one that sampled it
   * (src/loop/async.ts)
   */
  maxStaleness?: number;
  /** --overdue: what a step does about a running group the bound cannot carry (absent: wait; src/loop/async.ts) */
  overdue?: OverduePolicy;
  /** --oversample: groups in flight beyond the bound's window (absent: 0; needs overdue drop) */
  oversample?: number;
  out: string;
  concurrency: number;
  agentTimeoutMs: number;
  testTimeoutMs: number;
  resume: boolean;
  /** grade empty patches too (tests of the loop with a model that cannot edit files yet) */
  gradeEmptyPatches?: boolean;
  /** --overlong and --overlong-buffer of the step's build (recorded for its training) */
  overlong?: { mode: OverlongMode; buffer: number };
  /** --dynamic-sampling N: up to N extra rounds of tasks for uniform groups (dynamic-sampling.ts); 0: off */
  dynamicSampling?: number;
  /**
   * reward 0 for a sample the integrity layers flag (src/rollout/integrity/findings.ts); default on
   * (DEFAULTS.trainingRejectsTampering), --no-reject-test-tampering turns it off
   */
  rejectTestTampering?: boolean;
  /** a verifier grader command (src/rollout/verifier.ts) instead of the SWE tests */
  verifier?: string;
  /** the judge and the --reward expression (src/rollout/judge/setup.ts, docs/judge.md) */
  rewards?: RewardSetup;
  reloadCmd?: string;
  /**
   * --weight-sync (absent: auto), --weight-sync-pause (absent: wait), --weight-sync-address: how full
   * weights reach a running vLLM or SGLang (src/loop/publish.ts)
   */
  weightSync?: {
    choice?: WeightSyncChoice;
    pause?: PauseMode;
    rendezvous?: { host: string; port?: number };
    /** every --backend-url when there are several (--cluster spreads rollouts over them): each is published to */
    servers?: string[];
  };
  /** train flags (device, lora, lr, ...) and an optional train.json */
  trainFlags: Record<string, unknown>;
  trainConfig?: string;
  /** the options the run was given, by long flag name (src/options/config.ts): loop.json's `config` */
  config?: GivenOptions;
  /** exports a checkpoint to ONNX (polar export); injected so the loop does not depend on how */
  exportOnnx?: (checkpoint: string, dir: string, signal?: AbortSignal) => Promise<void>;
  /** SIGINT / SIGTERM (src/util/interrupt.ts): no new phase starts, the running one is stopped */
  signal?: AbortSignal;
  /** the backend to use (tests); default: created from `backend` */
  backendInstance?: Backend;
  /** --cluster: every evaluation is a `polar eval --cluster` of its tasks (src/loop/cluster.ts) */
  cluster?: LoopCluster;
  /** --train-nodes N (N > 1, with --cluster): each step's training across N nodes (src/train/cluster/train.ts) */
  trainNodes?: NodesTraining;
  /** stop after this phase of this step (tests of --resume after a crash) */
  crashAfter?: { step: number; phase: 'eval' | 'build' | 'train' };
  /** --report-to: the run's tracking writer (src/train/tracking/); null or absent: none */
  report?: ReportSetup | null;
}

export const rate = (x: number | null): string => (x === null ? 'n/a' : x.toFixed(3));

/** The tasks of step N: a fixed rotation through the training set (step 1 takes the first k). */
export function tasksForStep(all: SweInstance[], step: number, perStep: number): SweInstance[] {
  if (all.length === 0) return [];
  const out: SweInstance[] = [];
  for (let i = 0; i < Math.min(perStep, all.length); i++)
    out.push(all[((step - 1) * perStep + i) % all.length]!);
  return out;
}

export interface StepContext {
  out: string;
  backend: Backend;
  publisher: Publisher;
  trainSet: SweInstance[];
  evalSet: SweInstance[];
  /** the training-set row this step starts at (dynamic sampling) */
  firstRow: number;
  reporter: Reporter;
}
