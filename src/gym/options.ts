/** What polar gym is started with (src/gym/server.ts startGym; src/gym/command.ts makes it from the flags). */
import type { Backend, BackendOptions } from '../backends/types.ts';
import type { HarnessName } from '../harnesses/types.ts';
import type { ConnectionOptions } from '../http/server.ts';
import type { SweInstance } from '../rollout/dataset.ts';
import type { RewardSetup } from '../rollout/judge/setup.ts';
import type { Runtime } from '../rollout/runtime/types.ts';

export interface GymOptions {
  harness: HarnessName;
  backend: BackendOptions;
  /**
   * the inference servers, one backend each (NeMo RL's `policy_base_url` list); rollouts are spread
   * over them (src/gym/backends.ts). Default: [backend.url]
   */
  backendUrls?: string[];
  /** already created backends (tests inject them), one per server; default: createBackend per URL */
  backendInstance?: Backend | Backend[];
  /**
   * check each server's set-up before listening (ensureBackendReady: waits up to the backend timeout,
   * then one probe; a wrong set-up stops start-up with one message). Default: true unless backendInstance
   */
  probe?: boolean;
  runtime: Runtime;
  /** where the harness process runs: on this host, or inside the runtime's container */
  placement: 'host' | 'container';
  /** argv for --harness generic ({prompt} replaced) */
  genericCommand?: string[];
  /** prompt template when the row gives no input text ({{problem_statement}}, {{workdir}}, ...) */
  promptTemplate?: string;
  /** extra environment for every harness */
  harnessEnv?: Record<string, string>;
  /** profile options of the harness (e.g. { api: 'openai-responses' } for Pi) */
  harnessOptions?: Record<string, string>;
  /** --pass-env names */
  passEnv?: string[];
  /** instances a row may name by instance_id only */
  dataset?: SweInstance[];
  /** one folder per rollout (capture, patch, test log, results) */
  out: string;
  host?: string;
  port?: number;
  /** rollouts running at once; the rest wait */
  maxRollouts?: number;
  /** backend calls in flight at most per inference server, over all rollouts */
  maxInflight?: number;
  agentTimeoutMs?: number;
  testTimeoutMs?: number;
  /** largest request body (default DEFAULTS.gymMaxBodyBytes) */
  maxBodyBytes?: number;
  /** request bodies read at once; the rest wait (default DEFAULTS.gymBodyReads) */
  maxBodyReads?: number;
  /** timeouts and the connection cap of the HTTP server */
  connections?: ConnectionOptions;
  /**
   * the bearer token every route but GET /health and GET / requires; undefined: a fresh one is made
   * (Gym.token); null: none (--no-auth, for callers that cannot send a header, such as NeMo Gym)
   */
  token?: string | null;
  /**
   * take a row's operator fields as sent (src/rollout/row-trust.ts: test_cmd, eval_script, grader, image,
   * python, pip_packages, pre_install, install): commands, a container and an environment the caller chose
   */
  trustRowCommands?: boolean;
  /** grade a flagged rollout 0 (docs/eval.md, "Grading integrity"; default on: DEFAULTS.trainingRejectsTampering) */
  rejectTampering?: boolean;
  /** a verifier grader command (src/rollout/verifier.ts) instead of the SWE tests; a row's `grader` wins */
  verifier?: string;
  /** the judge and the --reward expression (src/rollout/judge/setup.ts): single mode, one rollout per request */
  rewards?: RewardSetup;
}
