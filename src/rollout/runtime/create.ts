/**
 * The one place a runtime is made from options, for `polar eval`, `polar loop` and `polar gym` alike:
 * the local runtime (refused for a harness unless --allow-unsandboxed), or a container runtime with
 * node, polar's node_modules and (for a harness) a writable harness config dir mounted.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Environments } from '../../env/build.ts';
import { UsageError } from '../../errors.ts';
import { log } from '../../util/log.ts';
import { CONTAINER_MODULES, CONTAINER_NODE } from '../agents.ts';
import { ContainerRuntime, type ContainerRuntimeOptions, type Mount } from './docker.ts';
import { LocalRuntime } from './local.ts';
import type { Runtime, RuntimeKind } from './types.ts';

/** Where samples run: the typed form of --runtime, --repos, --image, --network, --allow-unsandboxed. */
export interface RuntimeSetup {
  kind: RuntimeKind;
  /** local runtime: DIR/<owner>/<name> git repositories */
  repos: string;
  /** container image template ({instance_id} is replaced) */
  image?: string;
  network?: string;
  /** let a harness run on this machine with the local runtime */
  allowUnsandboxed?: boolean;
  /** keep the local runtime's temp dirs (debugging) */
  keepEnvs?: boolean;
  /**
   * Python environments built from the specs (src/env/) for the local runtime: where they are kept and
   * the interpreters by version; null (--no-envs): tests run in polar's own environment
   */
  environments?: { cacheDir: string; pythons: Record<string, string> } | null;
}

export interface RuntimeContext {
  /** the agent is a harness (untrusted code that needs node, its packages and its config dir) */
  harness: string | null;
  /** runs engine commands (tests: a fake engine); default: the real engine */
  runner?: ContainerRuntimeOptions['runner'];
  /** parent of the harness config dir base (tests); default: os.tmpdir() */
  tmpRoot?: string;
}

const NODE_MODULES = resolve(import.meta.dirname, '../../../node_modules');

/** the local runtime's warning is said once per process (polar loop sets up an evaluation every step) */
let warnedUnsandboxed = false;

export async function createRuntime(setup: RuntimeSetup, context: RuntimeContext): Promise<Runtime> {
  if (setup.kind === 'local') {
    if (context.harness && !setup.allowUnsandboxed) {
      throw new UsageError(
        `--runtime local would run the ${context.harness} harness unsandboxed on this machine`,
        'use --runtime docker, or pass --allow-unsandboxed if you accept that (gold, empty and predictions need no flag)',
      );
    }
    if (!warnedUnsandboxed)
      log.warn('the local runtime runs agents and tests on this machine without isolation');
    warnedUnsandboxed = true;
    const envs = setup.environments;
    return new LocalRuntime({
      reposDir: setup.repos,
      ...(setup.keepEnvs ? { keep: true } : {}),
      ...(envs ? { environments: new Environments({ ...envs, reposDir: setup.repos }) } : {}),
    });
  }
  const mounts: Mount[] = context.harness ? containerMounts() : [];
  const template = setup.image;
  return new ContainerRuntime({
    engine: setup.kind,
    ...(setup.network ? { network: setup.network } : {}),
    mounts,
    // a harness in a container reads the private config polar writes for it (CODEX_HOME, the Pi agent
    // dir, CLAUDE_CONFIG_DIR): those are made under one host dir mounted at the same path, writable
    ...(context.harness
      ? { harnessDirBase: await mkdtemp(join(context.tmpRoot ?? tmpdir(), 'polar-harness-')) }
      : {}),
    ...(template ? { image: (i) => template.replaceAll('{instance_id}', i.instance_id) } : {}),
    ...(context.runner ? { runner: context.runner } : {}),
  });
}

/** node and polar's node_modules, read-only, where harnessArgv's container launcher expects them */
export function containerMounts(): Mount[] {
  return [
    { host: process.execPath, container: CONTAINER_NODE },
    { host: NODE_MODULES, container: CONTAINER_MODULES },
  ];
}
