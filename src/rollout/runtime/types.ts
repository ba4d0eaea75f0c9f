/**
 * The runtime seam: where an instance's repository lives while an agent works on it and while it is
 * graded. Each `prepare` gives a fresh environment at base_commit holding no history after it
 * (history.ts); everything else (agents, patch extraction, grading) talks to it only through
 * InstanceEnv, so a new runtime is one new file. The runtimes: `sandbox` (bubblewrap, sandbox.ts),
 * `local` (unsandboxed, local.ts), `docker` / `podman` (docker.ts), `apptainer` (apptainer.ts).
 *
 * Host environments: a runtime made with a `hostEnvironments` resolver (--env-dir) asks it, per
 * instance and purpose, for a HostEnvironment: host directories (a venv, a conda prefix, the
 * interpreter a venv points at) that the environment mounts read-only at the same path, and
 * directories put first on PATH for every command, the agent's and the grader's alike. The
 * environments polar builds from the specs (src/rollout/env/, `environments`) reach the local and sandbox
 * runtimes through the same shape (environmentView), ahead of the resolver's, with the per-sample part
 * as InstanceEnv.environment. docs/eval.md, "Host environments" and "Environments".
 */

import type { SweInstance } from '../dataset.ts';
import type { Environments } from '../env/build.ts';
import type { SampleEnvironment } from '../env/types.ts';
import type { ExecResult } from '../exec.ts';
import type { EnvSetup } from '../specs.ts';

export interface EnvExecOptions {
  /** kill the whole process tree after this many ms */
  timeoutMs?: number;
  env?: Record<string, string>;
  input?: string;
  /** ends the command's tree (a cancelled sample): a container's process ends with the container */
  signal?: AbortSignal;
}

/** A host environment made visible inside: read-only mounts at the same path, and PATH entries first. */
export interface HostEnvironment {
  /** host directories mounted read-only at the same path (a venv, the interpreter prefix it points at) */
  mounts: string[];
  /** directories put first on PATH, in this order (usually `<prefix>/bin`) */
  path: string[];
  /** more variables for every command (VIRTUAL_ENV, CONDA_PREFIX) */
  env?: Record<string, string>;
}

/** Finds (or builds) the host environment of an instance; null: none (the runtime's own PATH). */
export type EnvironmentResolver = (
  instance: SweInstance,
  purpose: 'agent' | 'grade',
) => Promise<HostEnvironment | null>;

/** Resource limits of one environment (sandbox: cgroup v2 or rlimits; containers: the engine's flags). */
export interface Limits {
  /** bytes of memory (cgroup: the whole tree; rlimit: each process's data segment) */
  memoryBytes?: number;
  /** processes and threads at once */
  pids?: number;
  /** bytes: the largest file written (rlimit), and the size of the private /tmp */
  diskBytes?: number;
}

/** What a harness runs as, once its proxy listens: handed to InstanceEnv.launchHarness. */
export interface HarnessLaunchRequest {
  /** the harness command line (node and the harness entry, or the user's command) */
  argv: string[];
  /** the harness's environment (the allow-list of harnesses/env.ts plus the profile's settings) */
  env: Record<string, string>;
  /** the names of `env` a container must be passed (values never go on a command line) */
  passEnv: string[];
  /** the capture proxy, http://127.0.0.1:PORT: inside, the harness must reach it at the same URL */
  proxyUrl: string;
  /** the harness's private config dir (inside harnessDirBase) */
  runDir: string;
}

export interface HarnessLaunch {
  /** what to spawn on this host, where, and with which environment */
  command: string[];
  cwd: string;
  env: Record<string, string>;
  /** stops what the launch started on the host (the proxy's socket bridge); called once the harness ended */
  close(): Promise<void>;
  /**
   * the command that ends the harness where it really runs, should polar die while it runs (the harness
   * watchdog runs it): a container's `rm -f`, since ending the `exec` client on this host leaves the
   * process in the container running (moby/moby#9098); absent where ending the client's group is enough
   */
  orphaned?: string[];
}

/** A limit a run hit, as reported on the sample's result line (`agent.limit`). */
export const LIMIT_HITS = ['agent_timeout', 'agent_oom', 'agent_pids', 'agent_disk'] as const;
export type LimitHit = (typeof LIMIT_HITS)[number];

/** What a harness run ended with, for InstanceEnv.limitHit. */
export interface RunEnd {
  status: 'completed' | 'error' | 'timeout' | 'interrupted';
  exitCode: number | null;
  signal: string | null;
  /** the harness's stdout and stderr (the tail is enough) */
  output: string;
}

export interface InstanceEnv {
  /** the repository root as commands inside the environment see it (/testbed in sandboxes and containers) */
  readonly workdir: string;
  /** a directory inside the environment, outside the repository, for patch files */
  readonly scratch: string;
  /** runs a bash script with workdir as its working directory */
  exec(script: string, options?: EnvExecOptions): Promise<ExecResult>;
  /** writes a file (path relative to workdir, or absolute inside the environment) */
  writeFile(path: string, content: string): Promise<void>;
  /**
   * How to start a harness so it runs inside this environment and reaches the capture proxy at
   * `proxyUrl` (sandbox and containers: through a Unix socket and a forwarder on the inside's
   * 127.0.0.1, forward.mjs). Called by runCapture once the proxy listens.
   */
  launchHarness(request: HarnessLaunchRequest): Promise<HarnessLaunch>;
  /**
   * A host directory visible at the same path inside, private to this environment: where runCapture
   * makes a harness's private config dir (CODEX_HOME, CLAUDE_CONFIG_DIR, the Pi agent dir). Absent when
   * the harness runs on this host (any host dir will do).
   */
  readonly harnessDirBase?: string;
  /** shell lines that set the environment up before the tests as the official eval script does;
   * absent where that would change this machine (the local runtime) */
  envSetup?(setup: EnvSetup): string[];
  /** which limit (if any) ended a harness run that ended the way `end` says */
  limitHit?(end: RunEnd): Promise<LimitHit | null>;
  /**
   * the polar-built Python environment of the instance (src/rollout/env/): its per-sample install and import
   * guard; absent where the runtime brings its own (a container image) or the row needs none
   */
  readonly environment?: SampleEnvironment;
  /** the commit the agent's patch is taken against when set-up changes were committed (else base_commit) */
  patchBase?: string;
  /**
   * the tree as a folder of this host, where it is one (local, sandbox): polar takes the agent's patch
   * from there with a git directory of its own (src/rollout/integrity/view.ts), whatever the agent did
   * to the tree's .git; absent for containers
   */
  readonly hostTree?: string;
  dispose(): Promise<void>;
}

export interface Runtime {
  readonly kind: string;
  /** false when agents run directly on this machine */
  readonly isolated: boolean;
  /**
   * where a harness's files are: at their host paths (local; sandbox, which mounts them there) or at
   * /polar in a container (docker.ts CONTAINER_NODE); default host
   */
  readonly placement?: 'host' | 'container';
  /** the Python environments it builds from the specs (src/rollout/env/), absent where it builds none */
  readonly environments?: Environments;
  /** verifies the runtime can be used at all (engine reachable, repos dir present); throws EnvironmentError */
  check(instances: SweInstance[]): Promise<void>;
  /** a fresh environment at the instance's base_commit */
  prepare(instance: SweInstance, purpose: 'agent' | 'grade'): Promise<InstanceEnv>;
}

export const RUNTIME_KINDS = ['sandbox', 'local', 'docker', 'podman', 'apptainer'] as const;
export type RuntimeKind = (typeof RUNTIME_KINDS)[number];

/** An environment could not be set up (declared with polar's other errors, src/errors.ts). */
export { RuntimeError } from '../../errors.ts';

/** A launch that runs the harness as it is, on this host. */
export function hostLaunch(request: HarnessLaunchRequest, cwd: string): HarnessLaunch {
  return { command: request.argv, cwd, env: request.env, close: async () => {} };
}

/** Host environments one after the other (the first's PATH entries first); null when there are none. */
export function joinHostEnvironments(...parts: Array<HostEnvironment | null>): HostEnvironment | null {
  const present = parts.filter((p): p is HostEnvironment => p !== null);
  if (present.length === 0) return null;
  return {
    mounts: [...new Set(present.flatMap((p) => p.mounts))],
    path: present.flatMap((p) => p.path),
    env: Object.assign({}, ...present.map((p) => p.env ?? {})),
  };
}
