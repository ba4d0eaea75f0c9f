/**
 * The typed flags of every command that runs a harness on SWE-bench-style tasks (eval, loop, gym), and
 * what they set up in the engine: the runtime, and (eval, loop) the executor --cluster chooses.
 */
import { resolve } from 'node:path';
import type { ClusterChoice } from '../options/parsers.ts';
import { polarCommand } from '../train/cluster/polar.ts';
import { reposFor } from './dataset-repos.ts';
import type { JobExecutor } from './executors/job.ts';
import type { RuntimeSetup } from './runtime/create.ts';
import type { RuntimeKind } from './runtime/types.ts';

export interface RolloutFlags {
  piApi?: string;
  /** --pass-env NAME, repeatable */
  passEnv?: string[];
  runtime: RuntimeKind;
  /** --repos; none given: `repos/` beside the dataset file (reposFor) */
  repos?: string;
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

/**
 * --runtime and its companions as the runtime factory takes them (the same for eval, loop and gym);
 * `dataset`: the file whose folder holds `repos/` when --repos is not given.
 */
export function runtimeSetup(flags: RolloutFlags & { keepEnvs?: boolean }, dataset?: string): RuntimeSetup {
  return {
    kind: flags.runtime,
    repos: reposFor(flags.repos, dataset),
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

/** --cluster and what one sample asks of a node (eval, loop). */
export interface ClusterFlags {
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
}

/** Where --cluster runs the samples: this machine's pool, Ray, or Slurm, with the --cluster-* flags. */
export function clusterExecutor(f: ClusterFlags): JobExecutor {
  if (!f.cluster) return { kind: 'local' };
  const polar = polarCommand(f.clusterPolar);
  if (f.cluster.engine === 'slurm')
    return {
      kind: 'slurm',
      cpus: f.clusterCpus,
      memoryBytes: f.clusterMemory,
      ...(f.clusterShards !== undefined ? { shards: f.clusterShards } : {}),
      sbatch: f.sbatchArg ?? [],
      polar,
    };
  return {
    kind: 'ray',
    address: f.cluster.address ?? process.env.RAY_ADDRESS ?? 'auto',
    cpus: f.clusterCpus,
    memoryBytes: f.clusterMemory,
    ...(f.clusterShared ? { shared: resolve(f.clusterShared) } : {}),
    retries: f.clusterRetries,
    polar,
  };
}
