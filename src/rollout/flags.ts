/** The typed flags of every command that runs a harness on SWE-bench-style tasks (eval, loop, gym). */
import type { RuntimeSetup } from './runtime/create.ts';
import type { RuntimeKind } from './runtime/types.ts';

export interface RolloutFlags {
  piApi?: string;
  /** --pass-env NAME, repeatable */
  passEnv?: string[];
  runtime: RuntimeKind;
  repos: string;
  image?: string;
  network?: string;
  /** --network-allow HOST:PORT, repeatable */
  networkAllow?: Array<{ host: string; port: number }>;
  allowUnsandboxed?: boolean;
  /** bytes */
  memoryLimit: number;
  pidsLimit: number;
  /** bytes */
  diskLimit: number;
  /** --env-dir DIR, repeatable */
  envDir?: string[];
  cgroupParent?: string;
  /** milliseconds */
  agentTimeout: number;
  /** milliseconds */
  testTimeout: number;
  /** where environments are kept */
  envCache: string;
  /** --env-python X.Y=PATH, repeatable */
  envPython?: Record<string, string>;
  /** false with --no-envs: the tests run in polar's own environment */
  envs: boolean;
}

/** --runtime and its companions as the runtime factory takes them (the same for eval, loop and gym). */
export function runtimeSetup(flags: RolloutFlags & { keepEnvs?: boolean }): RuntimeSetup {
  return {
    kind: flags.runtime,
    repos: flags.repos,
    ...(flags.image ? { image: flags.image } : {}),
    ...(flags.network ? { network: flags.network } : {}),
    ...(flags.networkAllow?.length ? { networkAllow: flags.networkAllow } : {}),
    ...(flags.allowUnsandboxed ? { allowUnsandboxed: true } : {}),
    ...(flags.keepEnvs ? { keepEnvs: true } : {}),
    limits: { memoryBytes: flags.memoryLimit, pids: flags.pidsLimit, diskBytes: flags.diskLimit },
    ...(flags.envDir?.length ? { envDirs: flags.envDir } : {}),
    ...(flags.cgroupParent ? { cgroupParent: flags.cgroupParent } : {}),
    environments: flags.envs === false ? null : { cacheDir: flags.envCache, pythons: flags.envPython ?? {} },
  };
}
