/**
 * The one place a runtime is made from options, for `polar eval`, `polar loop` and `polar gym` alike:
 * the sandbox (bubblewrap, the default), the unsandboxed local runtime (refused for a harness unless
 * --allow-unsandboxed), or a container runtime (docker, podman, apptainer) with node, polar's
 * node_modules and the proxy forwarder mounted for a harness.
 */
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { UsageError } from '../../errors.ts';
import { log } from '../../util/log.ts';
import { Environments } from '../env/build.ts';
import { apptainerDialect } from './apptainer.ts';
import {
  CONTAINER_FORWARDER,
  CONTAINER_MODULES,
  CONTAINER_NODE,
  ContainerRuntime,
  type ContainerRuntimeOptions,
  type Mount,
} from './docker.ts';
import { LocalRuntime } from './local.ts';
import { FORWARDER, SandboxRuntime } from './sandbox.ts';
import {
  type EnvironmentResolver,
  type HostEnvironment,
  joinHostEnvironments,
  type Limits,
  type Runtime,
  type RuntimeKind,
} from './types.ts';

/** Where samples run: the typed form of --runtime and its companion flags. */
export interface RuntimeSetup {
  kind: RuntimeKind;
  /** local and sandbox runtimes: DIR/<owner>/<name> git repositories */
  repos: string;
  /** container image template ({instance_id} is replaced) */
  image?: string;
  /** sandbox: none | host; containers: none | host | a network name */
  network?: string;
  /** sandbox: host addresses reachable inside at 127.0.0.1 on the same port (--network-allow) */
  networkAllow?: Array<{ host: string; port: number }>;
  /** let a harness run on this machine with the local runtime */
  allowUnsandboxed?: boolean;
  /** keep the environments' temp dirs (debugging) */
  keepEnvs?: boolean;
  limits?: Limits;
  /** host environments for every instance (--env-dir): read-only at the same path, bin/ first on PATH */
  envDirs?: string[];
  /** sandbox: a delegated cgroup v2 directory (limits of the whole tree) */
  cgroupParent?: string;
  /**
   * Python environments built from the specs (src/rollout/env/) for the local and sandbox runtimes: where they
   * are kept and the interpreters by version; null (--no-envs): tests run in polar's own environment
   */
  environments?: { cacheDir: string; pythons: Record<string, string> } | null;
}

export interface RuntimeContext {
  /** the agent is a harness (untrusted code that needs node, its packages and its config dir) */
  harness: string | null;
  /** runs engine commands (tests: a fake engine); default: the real engine */
  runner?: ContainerRuntimeOptions['runner'];
  /** parent of the environments' folders (tests); default: os.tmpdir() */
  tmpRoot?: string;
  /** host environments per instance; default: --env-dir for every instance */
  hostEnvironments?: EnvironmentResolver;
}

export const NODE_MODULES = resolve(import.meta.dirname, '../../../node_modules');

/** the local runtime's warning is said once per process (polar loop sets up an evaluation every step) */
let warnedUnsandboxed = false;

/**
 * A host directory as an environment: mounted read-only, DIR/bin first on PATH. A venv (pyvenv.cfg)
 * brings the interpreter prefix its `home` names along, which its python links into.
 */
export function hostEnvironmentOf(dir: string): HostEnvironment {
  const path = realpathSync(resolve(dir));
  const mounts = [path];
  const cfg = join(path, 'pyvenv.cfg');
  if (existsSync(cfg)) {
    const home = /^home\s*=\s*(.+)$/m.exec(readFileSync(cfg, 'utf8'))?.[1]?.trim();
    if (home && existsSync(home)) mounts.push(dirname(realpathSync(home)));
  }
  return { mounts, path: [join(path, 'bin')], ...(existsSync(cfg) ? { env: { VIRTUAL_ENV: path } } : {}) };
}

/** --env-dir DIR...: the same host environments, in order, for every instance */
export function envDirsResolver(dirs: string[]): EnvironmentResolver | undefined {
  if (dirs.length === 0) return undefined;
  const host = joinHostEnvironments(...dirs.map(hostEnvironmentOf));
  return async () => host;
}

export async function createRuntime(setup: RuntimeSetup, context: RuntimeContext): Promise<Runtime> {
  const hostEnvironments = context.hostEnvironments ?? envDirsResolver(setup.envDirs ?? []);
  const common = {
    ...(context.tmpRoot ? { tmpRoot: context.tmpRoot } : {}),
    ...(hostEnvironments ? { hostEnvironments } : {}),
    ...(setup.limits ? { limits: setup.limits } : {}),
  };
  // environments built from the specs: on this host (local) or bound read-only into the sandbox;
  // a container brings its own in its image
  const built = setup.environments
    ? { environments: new Environments({ ...setup.environments, reposDir: setup.repos }) }
    : {};
  if (setup.kind !== 'sandbox' && setup.networkAllow?.length)
    throw new UsageError('--network-allow is for --runtime sandbox', 'containers take --network NAME');
  if (setup.kind !== 'sandbox' && setup.cgroupParent)
    throw new UsageError(
      '--cgroup-parent is for --runtime sandbox',
      'containers take limits from the engine',
    );
  if (setup.kind === 'local') {
    if (context.harness && !setup.allowUnsandboxed) {
      throw new UsageError(
        `--runtime local would run the ${context.harness} harness unsandboxed on this machine`,
        'use --runtime sandbox (bubblewrap) or docker, or pass --allow-unsandboxed if you accept that (gold, empty and predictions need no flag)',
      );
    }
    if (!warnedUnsandboxed)
      log.warn('the local runtime runs agents and tests on this machine unsandboxed, with your rights');
    warnedUnsandboxed = true;
    return new LocalRuntime({
      reposDir: setup.repos,
      ...common,
      ...built,
      ...(setup.keepEnvs ? { keep: true } : {}),
    });
  }
  if (setup.kind === 'sandbox') {
    if (setup.network && setup.network !== 'none' && setup.network !== 'host')
      throw new UsageError(
        `--network ${setup.network}: the sandbox takes none or host`,
        'containers take network names',
      );
    if (setup.network === 'host')
      log.warn('--network host: sandboxed commands reach every port of this machine and the internet');
    if (setup.networkAllow?.length)
      log.warn(
        `--network-allow: sandboxed commands reach ${setup.networkAllow.map((a) => `${a.host}:${a.port}`).join(', ')}`,
      );
    return new SandboxRuntime({
      reposDir: setup.repos,
      ...common,
      ...built,
      ...(setup.network === 'host' ? { network: 'host' as const } : {}),
      ...(setup.networkAllow?.length ? { allow: setup.networkAllow } : {}),
      ...(context.harness ? { harnessModules: NODE_MODULES } : {}),
      ...(setup.cgroupParent ? { cgroupParent: setup.cgroupParent } : {}),
      ...(setup.keepEnvs ? { keep: true } : {}),
    });
  }
  const template = setup.image;
  return new ContainerRuntime({
    engine: setup.kind,
    ...(setup.kind === 'apptainer' ? { dialect: apptainerDialect() } : {}),
    ...common,
    ...(setup.network ? { network: setup.network } : {}),
    mounts: context.harness ? containerMounts() : [],
    ...(context.harness ? { harness: true } : {}),
    ...(template ? { image: (i) => template.replaceAll('{instance_id}', i.instance_id) } : {}),
    ...(context.runner ? { runner: context.runner } : {}),
  });
}

/** node, polar's node_modules and the forwarder, read-only, where harnessArgv's container launcher expects them */
export function containerMounts(): Mount[] {
  return [
    { host: process.execPath, container: CONTAINER_NODE },
    { host: NODE_MODULES, container: CONTAINER_MODULES },
    { host: FORWARDER, container: CONTAINER_FORWARDER },
  ];
}
