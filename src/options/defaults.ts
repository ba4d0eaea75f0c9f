/**
 * Every CLI default, declared once: the value the code uses (already parsed: milliseconds, bytes, numbers)
 * and the words --help shows for it. Commands take defaults from here (through `withDefault`), and code
 * that runs without the CLI (polar gym's server, the loop's evaluations) falls back to the same values.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Option } from 'commander';

export interface Default<T> {
  value: T;
  /** what --help shows after "default:" */
  shown: string;
}

const d = <T>(value: T, shown = String(value)): Default<T> => ({ value, shown });

/**
 * polar build --unparsed-tool-calls: what a trajectory with a call whose tool call the server did not
 * parse gets. zero: reward 0, tokens kept and trained; mask: that call's sampled ids get mask 0, reward
 * kept; keep: nothing changes (the flags and the counts stay).
 */
export const UNPARSED_TOOL_CALL_MODES = ['zero', 'mask', 'keep'] as const;
export type UnparsedToolCallMode = (typeof UNPARSED_TOOL_CALL_MODES)[number];

/**
 * --overlong (build, train, loop): what a trajectory with an overlong trace trains (a call that ended at
 * max_tokens, or a trace cut by build's --max-trace-tokens). mask: those traces' tokens get no loss;
 * penalty: DAPO's soft overlong punishment added to the reward (src/trajectory/overlong.ts); keep: nothing
 * changes (the flags and the counts stay). docs/trajectory-format.md, "Overlong traces".
 */
export const OVERLONG_MODES = ['mask', 'penalty', 'keep'] as const;
export type OverlongMode = (typeof OVERLONG_MODES)[number];

/**
 * polar loop --overdue (--max-staleness >= 1): what a step does about a group still running that the
 * bound cannot carry into a later step (src/loop/async.ts). wait: the step waits for it (every task's
 * samples are trained, whatever they take; the trainer and the rollout slots idle meanwhile); drop: the
 * step trains the first complete groups within the bound, the overdue group is cancelled (its running
 * samples ended, never graded) and a fresh one launched for its task (biased against long tasks).
 * docs/loop.md, "Overdue groups".
 */
export const OVERDUE_POLICIES = ['wait', 'drop'] as const;
export type OverduePolicy = (typeof OVERDUE_POLICIES)[number];

/**
 * What grades a run (--grader, parsed once by `grader` in src/options/parsers.ts): polar's own grader (the
 * SWE tests), the official SWE-bench harness after the run, or a verifier command per rollout.
 */
export type Grader =
  | { kind: 'polar' }
  | { kind: 'swebench' }
  | { kind: 'verifier'; command: string }
  /** a model scores each rollout against --rubric (src/rollout/judge/) */
  | { kind: 'judge' };

/** --group-by: task_id, none, or meta:KEY (a key of the session record's meta) */
export type GroupBy = 'task_id' | 'none' | `meta:${string}`;

/**
 * polar loop --weight-sync: how full weights reach a running vLLM or SGLang. auto: in place by the path the
 * server offers (vLLM: its --weight-transfer-config backend; SGLang: from disk), else --reload-cmd; disk,
 * nccl: that path or an error; restart: --reload-cmd always. docs/loop.md, "Publishing".
 */
export const WEIGHT_SYNC_CHOICES = ['auto', 'disk', 'nccl', 'restart'] as const;
export type WeightSyncChoice = (typeof WEIGHT_SYNC_CHOICES)[number];

/**
 * polar loop --weight-sync-pause: what an in-place weight update does to the calls in flight, as vLLM's
 * `/pause?mode=` names it (src/backends/weight-updates.ts): wait, keep or abort.
 */
export const PAUSE_MODES = ['wait', 'keep', 'abort'] as const;
export type PauseMode = (typeof PAUSE_MODES)[number];

export const DEFAULTS = {
  /**
   * --overlong: a trace cut by a length limit is masked (DAPO's overlong filtering: its reward says
   * nothing about the answer the limit cut off; docs/trajectory-format.md, "Overlong traces")
   */
  overlong: d<OverlongMode>('mask'),
  /** --overlong-buffer: DAPO's L_cache, the tokens below a limit where --overlong penalty starts (DAPO's 4096) */
  overlongBuffer: d(4096),
  /**
   * polar build: a trajectory with a tool call the server did not parse gets reward 0 and keeps its
   * tokens (NVIDIA Polar's training filter; docs/trajectory-format.md, "Unparsed tool calls")
   */
  unparsedToolCalls: d('zero' as UnparsedToolCallMode),
  /**
   * a flagged sample's reward (docs/eval.md, "Grading integrity"): training (polar loop, polar gym) grades
   * it 0 and keeps it trainable (--no-reject-test-tampering keeps the tests' outcome); polar eval keeps
   * the official outcome and reports both figures (--reject-test-tampering grades it 0)
   */
  trainingRejectsTampering: d(true, 'on'),
  evalRejectsTampering: d(false, 'off'),
  /** harness and test time limits of one sample (eval, loop, gym) */
  agentTimeoutMs: d(30 * 60_000, '1800 (30 min)'),
  testTimeoutMs: d(30 * 60_000, '1800 (30 min)'),
  /** abandon one backend call after this long */
  backendTimeoutMs: d(600_000, '600 (10 min)'),
  /** capture file format version written (docs/capture-format.md) */
  captureFormat: d(3 as 1 | 2 | 3, 'v3'),
  /** skip the server set-up probe that runs before a harness starts (capture, serve, eval, loop, gym) */
  skipBackendCheck: d(false, 'off'),
  /** abandon a backend call whose started response sends nothing for this long */
  backendIdleTimeoutMs: d(300_000, '300 (5 min)'),
  /** largest request body the capture proxy accepts */
  maxBodyBytes: d(64 * 1024 * 1024, '64MiB'),
  /**
   * request-body bytes the capture proxy (capture, serve) holds at once over all calls in flight, at
   * least one largest body; past it a call is refused with 503 and retry-after (polar gym: gymBodyReads)
   */
  bodyBudgetBytes: d(128 * 1024 * 1024, '128MiB'),
  /** every polar HTTP server (proxy, serve, gym): ms for a whole request (headers and body) to arrive */
  requestTimeoutMs: d(300_000, '300 (5 min)'),
  /** every polar HTTP server: open connections at most (beyond it a new one takes the place of an idle one, or is dropped) */
  maxConnections: d(1024),
  /** every polar HTTP server: open connections from one client address at most */
  maxConnectionsPerAddress: d(512),
  /** every polar HTTP server: a connection that delivers no complete request for this long is closed */
  idleConnectionMs: d(10_000, '10 s'),
  /** largest request body polar gym reads (a task row, a batch of verify responses) */
  gymMaxBodyBytes: d(16 * 1024 * 1024, '16MiB'),
  /** request bodies polar gym reads at once; the rest wait (memory: this times the body limit) */
  gymBodyReads: d(4),
  /** sessions polar serve keeps open at once (each holds a capture file open) */
  maxSessions: d(256),
  /** polar serve closes a session (status timeout) that saw no call and no admin request for this long */
  sessionIdleTimeoutMs: d(3_600_000, '3600 (1 h)'),
  /** backend calls in flight at most (serve, gym) */
  maxInflight: d(64),
  /** rollouts at once in polar gym */
  maxRollouts: d(8),
  /** samples run at once (eval, loop) */
  concurrency: d(4),
  samples: d(1),
  /** binding */
  host: d('127.0.0.1'),
  servePort: d(8100),
  gymPort: d(8200),
  /** --cluster: what one sample asks of a node (CPUs, memory), and how often a sample lost with its node runs again */
  clusterCpus: d(1),
  clusterMemoryBytes: d(2 * 1024 ** 3, '2GiB'),
  clusterRetries: d(3),
  /** polar loop --train-nodes: the nodes of the --cluster a step trains on (1: the machine polar runs on) */
  trainNodes: d(1, '1 (the machine polar runs on)'),
  /** output places */
  evalOut: d('runs/eval'),
  gymOut: d('runs/gym'),
  serveCaptures: d('polar-captures'),
  inspectOutput: d('report.html'),
  /** the SWE-bench-style runtime: bubblewrap (docs/eval.md, "Runtimes") */
  runtime: d('sandbox' as 'sandbox' | 'local' | 'docker' | 'podman' | 'apptainer'),
  /** limits of one environment (sandbox: cgroup v2 or rlimits; containers: the engine's flags) */
  memoryLimit: d(8 * 1024 ** 3, '8GiB'),
  pidsLimit: d(1024),
  diskLimit: d(4 * 1024 ** 3, '4GiB'),
  /** --repos: none given is `repos/` beside the dataset file (src/rollout/dataset-repos.ts reposFor) */
  repos: d<string | undefined>(undefined, 'repos/ beside the dataset file'),
  /**
   * the sandbox's and the containers' network: a loopback only, the capture proxy reached through a
   * socket and forward.mjs (--network host is the unsafe opt-in)
   */
  containerNetwork: d('none'),
  /** where the environments built from the specs are kept (src/rollout/env/) */
  envCache: d(
    join(process.env.POLAR_CACHE_DIR ?? join(homedir(), '.cache', 'polar'), 'envs'),
    '$POLAR_CACHE_DIR/envs, else ~/.cache/polar/envs',
  ),
  /**
   * the ancestors-only history repositories of the local and sandbox runtimes, one per (source,
   * base_commit), kept across runs (src/rollout/runtime/history.ts)
   */
  historyCache: d(
    join(process.env.POLAR_CACHE_DIR ?? join(homedir(), '.cache', 'polar'), 'history'),
    '$POLAR_CACHE_DIR/history, else ~/.cache/polar/history',
  ),
  split: d('test'),
  /** polar, swebench, or a verifier command (src/rollout/verifier.ts) */
  grader: d<Grader>({ kind: 'polar' }, 'polar'),
  /** the judge (docs/judge.md): each rollout alone, and one call's time limit */
  judgeMode: d<'single' | 'group'>('single'),
  judgeTimeoutMs: d(120_000, '120 (2 min)'),
  gymHarness: d('pi' as const),
  /** the model the embedded backend loads when no --model is given */
  embeddedModel: d('onnx-community/Qwen3-0.6B-ONNX'),
  /**
   * the offline stand-in for it, for trying polar: a random Qwen3 with the real vocabulary whose stop
   * bias ends turns after a token or two (Pi asks for 8192), made by one command (TINY_TRIAL_COMMAND)
   */
  tinyTrialModel: d('tiny:arch=qwen3,vocab=151669,stop_bias=40'),
  /** polar grade: the official rules exactly, or with the guards polar eval adds */
  gradeSemantics: d('official' as const),
  /** polar inspect */
  maxTokensPerTrace: d(2000),
  /** polar build: the output format, the GRPO groups, what --over-max-trace-tokens does to a longer trace */
  buildFormat: d('polar' as const),
  groupBy: d<GroupBy>('task_id'),
  overMaxTraceTokens: d<'truncate' | 'drop'>('truncate'),
  /** polar build: end-of-turn token ids (ChatML/Qwen <|im_end|>, <|endoftext|>) */
  eotIds: d<readonly number[]>([151645, 151643], '151645,151643'),
  /** polar loop */
  groupSize: d(16),
  tasksPerStep: d(9),
  steps: d(50),
  evalEvery: d(10),
  /** polar loop --dynamic-sampling: extra rounds of tasks for uniform groups (0: off, the loop as before) */
  dynamicSampling: d(0, '0 (off)'),
  /**
   * --report-to of train, loop and eval: the experiment trackers a run writes to while it runs (none:
   * neither package is imported); --project: the W&B project (src/train/tracking/, docs/train.md)
   */
  reportTo: d<readonly ('tensorboard' | 'wandb')[]>([], 'none'),
  wandbProject: d('polar'),
  /** polar loop --max-staleness: 0 alternates rollouts and training strictly (src/loop/async.ts) */
  maxStaleness: d(0),
  /** polar loop --overdue: a step waits for a group the staleness bound cannot carry (unbiased; it stalls) */
  overdue: d<OverduePolicy>('wait'),
  /**
   * polar loop --oversample (with --overdue drop): groups launched beyond the staleness bound's window,
   * the first complete ones trained, what goes stale dropped (slot time spent for less waiting; 0: none)
   */
  oversample: d(0),
  /** how long polar loop waits for a restarted server to answer */
  reloadReadyTimeoutMs: d(600_000, '600 (10 min)'),
  /** --weight-sync: full weights in place by the path the server offers, else --reload-cmd (docs/loop.md) */
  weightSync: d<WeightSyncChoice>('auto'),
  /**
   * --weight-sync-pause: what an in-place update does to the calls in flight; wait (vLLM's mode name) lets
   * them finish on the old weights first: nothing mixed, nothing cut
   */
  weightSyncPause: d<PauseMode>('wait'),
} as const;

/** The one command that makes the offline trial model in ./tiny-model (README, the offline error's hint). */
export const TINY_TRIAL_COMMAND = `polar export ${DEFAULTS.tinyTrialModel.value} --out tiny-model`;

/** An option with its typed default from DEFAULTS, shown in --help as words (`default: 1800 (30 min)`). */
export function withDefault<T>(option: Option, value: Default<T>): Option {
  return option.default(value.value, value.shown);
}
