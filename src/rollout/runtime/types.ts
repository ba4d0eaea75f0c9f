/**
 * The runtime seam: where an instance's repository lives while an agent works on it and while it is
 * graded. Each `prepare` gives a fresh environment at base_commit; everything else (agents, patch
 * extraction, grading) talks to it only through InstanceEnv, so a new runtime (apptainer, a remote
 * sandbox) is one new file.
 */
import type { SampleEnvironment } from '../../env/types.ts';
import { PolarError } from '../../errors.ts';
import type { SweInstance } from '../dataset.ts';
import type { ExecResult } from '../exec.ts';
import type { EnvSetup } from '../specs.ts';

export interface EnvExecOptions {
  /** kill the whole process tree after this many ms */
  timeoutMs?: number;
  env?: Record<string, string>;
  input?: string;
}

export interface InstanceEnv {
  /** the repository root as commands inside the environment see it (/testbed in containers) */
  readonly workdir: string;
  /** a directory inside the environment, outside the repository, for patch files */
  readonly scratch: string;
  /** runs a bash script with workdir as its working directory */
  exec(script: string, options?: EnvExecOptions): Promise<ExecResult>;
  /** writes a file (path relative to workdir, or absolute inside the environment) */
  writeFile(path: string, content: string): Promise<void>;
  /**
   * How to start a host-side command line (a harness under `polar capture`) so it runs inside this
   * environment: the argv to spawn on the host and the host cwd to spawn it in. `passEnv` names the
   * variables (proxy URL, API key) the harness must see inside; `env`, when given, is what the
   * environment's commands get (the local runtime's Python environment: PATH, VIRTUAL_ENV).
   */
  hostCommand(
    argv: string[],
    passEnv: string[],
  ): { command: string[]; cwd: string; env?: Record<string, string> };
  /**
   * A host directory that is visible at the same path inside the environment: where runCapture makes a
   * harness's private config dir (CODEX_HOME, CLAUDE_CONFIG_DIR, the Pi agent dir) so a harness running
   * inside reads it. Absent when the harness runs on this host (any host dir will do).
   */
  readonly harnessDirBase?: string;
  /** how a URL on the host (the capture proxy) is reached from inside */
  reachHost(url: string): string;
  /** shell lines that set the environment up before the tests as the official eval script does;
   * absent where that would change this machine (the local runtime) */
  envSetup?(setup: EnvSetup): string[];
  /**
   * the polar-built Python environment of the instance (src/env/): its per-sample install and import
   * guard; absent where the runtime brings its own (a container image) or the row needs none
   */
  readonly environment?: SampleEnvironment;
  /** the commit the agent's patch is taken against when set-up changes were committed (else base_commit) */
  patchBase?: string;
  dispose(): Promise<void>;
}

export interface Runtime {
  readonly kind: string;
  /** false when agents run directly on this machine */
  readonly isolated: boolean;
  /** verifies the runtime can be used at all (engine reachable, repos dir present); throws EnvironmentError */
  check(instances: SweInstance[]): Promise<void>;
  /** a fresh environment at the instance's base_commit */
  prepare(instance: SweInstance, purpose: 'agent' | 'grade'): Promise<InstanceEnv>;
}

export const RUNTIME_KINDS = ['local', 'docker', 'podman'] as const;
export type RuntimeKind = (typeof RUNTIME_KINDS)[number];

/**
 * An environment could not be set up (a checkout or a container start failed). An expected failure of
 * one sample: the orchestrator records it as that sample's error, and the CLI reports it as one line.
 */
export class RuntimeError extends PolarError {
  constructor(message: string, hint?: string) {
    super(message, { hint });
  }
}
