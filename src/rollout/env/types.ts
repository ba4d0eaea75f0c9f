/**
 * The environment layer's seam: what polar builds once per (repository, version) and what a runtime
 * gives the commands of one sample. A runtime (local, sandbox) asks `Environments.forInstance` for the
 * cached environment, puts `environmentView(cached, layer).path` first on PATH and its `env` into every
 * command, makes its `mounts` visible at the same path (a sandbox binds them read-only), and hands the
 * sample's InstanceEnv to `sampleEnvironment` for the per-sample install and the import guard.
 */
import { RuntimeError } from '../../errors.ts';

/** How one environment is built and how a sample is installed into its layer. */
export interface EnvRecipe {
  repo: string;
  version: string;
  /** where the recipe comes from: the official v4.1.0 table, or the row's own fields over it */
  source: 'swebench-v4.1.0' | 'row';
  /** "3.9", an interpreter path, or null for `python3` on PATH */
  python: string | null;
  /** the spec's `packages` as pip requirement lines (read from the repository when the spec names a file) */
  requirements: string[];
  pipPackages: string[];
  /** pre_install steps run against the sample's tree, before install (`/testbed` is the tree) */
  preInstall: string[];
  /** pre_install steps that change this machine (apt-get, locale-gen, /etc): not run, only reported */
  systemSteps: string[];
  /** the repository's install step, run against the sample's tree in its layer */
  install: string | null;
  /** what `requirements` was read from (`<commit>:<path>`), or null */
  requirementsFrom: string | null;
  /** conda packages left out because pip has no counterpart (reported) */
  skipped: string[];
}

/** The interpreter an environment is built with. */
export interface PythonInfo {
  /** the executable polar runs (`<prefix>/bin/pythonX.Y`) */
  executable: string;
  /** "3.9.18" */
  version: string;
  /** sys.base_prefix: what must be visible for the environment to run */
  prefix: string;
}

/** A built environment in the cache. */
export interface CachedEnv {
  /** the hash of what built it (recipe steps, interpreter, polar's builder) */
  key: string;
  /** `owner__name-version-<key prefix>`: its folder's name under the cache */
  name: string;
  /** the folder (a venv) */
  dir: string;
  python: PythonInfo;
  recipe: EnvRecipe;
  /** the venv's site-packages */
  sitePackages: string;
  /** true when this call built it, false when it was found in the cache */
  built: boolean;
}

/** What the commands of one sample get, for a layer at `layer` (a path as the commands see it). */
export interface EnvironmentView {
  /** directories put first on PATH, in this order */
  path: string[];
  /** variables for every command (VIRTUAL_ENV, PIP_RETRIES) */
  env: Record<string, string>;
  /**
   * host paths the commands read, to be visible read-only at the same path (the cache entry, the
   * interpreter's prefix it points at): a sandbox binds them, the local runtime sees them as they are
   */
  mounts: string[];
}

export interface InstallOutcome {
  ok: boolean;
  /** the step that failed (`pre_install: ...`, `install: ...`, `layer`), or null */
  step: string | null;
  output: string;
  durationMs: number;
}

/** A guard finding: the tests imported the repository's package from outside the sample's tree. */
export interface GuardViolation {
  message: string;
}

/** The per-sample part of an environment, on one prepared InstanceEnv. */
export interface SampleEnvironment {
  readonly cached: CachedEnv;
  /** the layer's folder, as the sample's commands see it */
  readonly layer: string;
  /**
   * makes the layer and runs pre_install and install against the tree as it is now, or replays the
   * install of the unpatched tree where the runtime keeps an install memo (install-memo.ts) and `patch`,
   * what was applied to the tree at base_commit (none: the tree is at base_commit), touches nothing that
   * install read
   */
  install(request?: { patch?: string }): Promise<InstallOutcome>;
  /**
   * where the runtime keeps an install memo and there is none yet: installs the tree, which must be at
   * base_commit with no code of the agent's run yet, and keeps the memo (its time counts in the next
   * install's); otherwise nothing
   */
  prime(): Promise<void>;
  /** variables that turn the import guard on for the test run */
  guardEnv(): Record<string, string>;
  /**
   * reads what the guarded run imported; `passed`: whether any test passed in its log; `testCmd`: the
   * command that ran the tests, when polar built it (its program must be in the environment)
   */
  checkGuard(run: { passed: boolean; testCmd: string | null }): Promise<GuardViolation | null>;
}

/**
 * An environment could not be built: a failed step (venv, pip), a missing interpreter. An
 * infrastructure failure of the samples that need it (an `error`, retried by --resume), with the
 * failing step's log.
 */
export class EnvBuildError extends RuntimeError {
  constructor(
    message: string,
    readonly log: string,
    hint?: string,
  ) {
    super(message, hint);
  }
}
