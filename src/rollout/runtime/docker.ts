/**
 * The container runtimes: docker and podman (these commands), and apptainer (apptainer.ts, the same
 * runtime through another dialect). One container per prepare from the instance image (the row's
 * `image`, else the official `swebench/sweb.eval.x86_64.<id with __ -> _1776_>:latest`), workdir
 * /testbed, the conda env `testbed` activated for every command. Each container gets a private folder
 * on the host (never shared between samples) mounted at the same path: the harness's config dir and
 * the Unix socket that leads to the capture proxy. No host network: `--network none` by default, the
 * proxy reached through that socket and forward.mjs on the container's 127.0.0.1 (a named network of
 * the user's, or `host`, is an opt-in). The image's /testbed is stripped of history after HEAD at start
 * (history.ts). Every command line is built by a pure function, so they are unit-tested without an engine.
 */
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EnvironmentError } from '../../errors.ts';
import { DEFAULTS } from '../../options/defaults.ts';
import type { SweInstance } from '../dataset.ts';
import { type ExecResult, execTree } from '../exec.ts';
import type { EnvSetup } from '../specs.ts';
import { makeTempDir, removeTempDir } from '../temp-dirs.ts';
import { type Bridge, hostPort, openBridge } from './bridge.ts';
import { scrubLines } from './history.ts';
import { classifyEnd } from './limits.ts';
import {
  type EnvExecOptions,
  type EnvironmentResolver,
  type HarnessLaunch,
  type HarnessLaunchRequest,
  type HostEnvironment,
  type InstanceEnv,
  type LimitHit,
  type Limits,
  type RunEnd,
  type Runtime,
  RuntimeError,
} from './types.ts';

export interface Mount {
  host: string;
  container: string;
  readonly?: boolean;
}

export type ContainerEngine = 'docker' | 'podman' | 'apptainer';
export type Runner = (
  argv: string[],
  options: { input?: string; timeoutMs?: number; signal?: AbortSignal },
) => Promise<ExecResult>;

export interface ContainerRuntimeOptions {
  engine?: ContainerEngine;
  /** image for an instance; default: the row's image, else the official SWE-bench name */
  image?: (instance: SweInstance) => string;
  /** 'none' (default: loopback only, the proxy through the socket), a network name, or 'host' (unsafe) */
  network?: string;
  platform?: string;
  mounts?: Mount[];
  /** a harness runs in the container: its private folder holds the config dir and the proxy's socket */
  harness?: boolean;
  limits?: Limits;
  hostEnvironments?: EnvironmentResolver;
  /** parent of the containers' private folders (default os.tmpdir()) */
  tmpRoot?: string;
  env?: Record<string, string>;
  /** runs engine commands; injected in tests */
  runner?: Runner;
  /** the engine's command lines; default: docker's or podman's (apptainer's: apptainerDialect, apptainer.ts) */
  dialect?: ContainerDialect;
}

export const TESTBED = '/testbed';
/** where node, polar's node_modules and the forwarder are mounted (harnessArgv's container launcher) */
export const CONTAINER_NODE = '/polar/bin/node';
export const CONTAINER_MODULES = '/polar/node_modules';
export const CONTAINER_FORWARDER = '/polar/forward.mjs';
/** `run` may pull a multi-GB SWE-bench image first */
const START_TIMEOUT_MS = 30 * 60_000;
export const ACTIVATE =
  'if [ -f /opt/miniconda3/bin/activate ]; then . /opt/miniconda3/bin/activate && conda activate testbed; fi';

/** The official prebuilt image for an instance (lower case; `__` becomes `_1776_`). */
export function officialImage(instanceId: string, namespace = 'swebench', arch = 'x86_64'): string {
  return `${namespace}/sweb.eval.${arch}.${instanceId.replaceAll('__', '_1776_').toLowerCase()}:latest`;
}

/** SWE-Gym's image naming (`xingyaoww/sweb.eval.x86_64.<id with __ -> _s_>`). */
export function sweGymImage(instanceId: string): string {
  return `xingyaoww/sweb.eval.x86_64.${instanceId.replaceAll('__', '_s_').toLowerCase()}:latest`;
}

export function containerName(instanceId: string, purpose: string, nonce: string): string {
  return `polar-${purpose}-${instanceId.replace(/[^a-zA-Z0-9_.-]/g, '-').toLowerCase()}-${nonce}`.slice(
    0,
    120,
  );
}

export interface StartOptions {
  network?: string;
  platform?: string;
  mounts?: Mount[];
  env?: Record<string, string>;
  limits?: Limits;
}

/** The docker/podman limit flags: memory (no swap on top), processes, largest file. */
export function limitFlags(limits: Limits = {}): string[] {
  const flags: string[] = [];
  if (limits.memoryBytes)
    flags.push('--memory', `${limits.memoryBytes}b`, '--memory-swap', `${limits.memoryBytes}b`);
  if (limits.pids) flags.push('--pids-limit', String(limits.pids));
  if (limits.diskBytes) flags.push('--ulimit', `fsize=${limits.diskBytes}:${limits.diskBytes}`);
  return flags;
}

export function buildRunArgs(engine: string, name: string, image: string, options: StartOptions): string[] {
  const args = [engine, 'run', '-d', '--rm', '--name', name, '-w', TESTBED];
  args.push('--network', options.network ?? DEFAULTS.containerNetwork.value);
  args.push('--platform', options.platform ?? 'linux/amd64');
  args.push(...limitFlags(options.limits));
  for (const m of options.mounts ?? [])
    args.push('-v', `${m.host}:${m.container}${m.readonly === false ? '' : ':ro'}`);
  for (const [k, v] of Object.entries(options.env ?? {})) args.push('-e', `${k}=${v}`);
  args.push('--entrypoint', 'tail', image, '-f', '/dev/null');
  return args;
}

export interface ExecOptions {
  timeoutMs?: number;
  env?: Record<string, string>;
  interactive?: boolean;
  /** directories put first on PATH after the conda env is activated (host environments) */
  path?: string[];
}

/** The script a container runs: the conda env activated, host environments first on PATH, then `script`. */
export function containerScript(script: string, path: string[] = []): string {
  const prefix = path.length ? `\nexport PATH=${path.map((p) => `'${p}'`).join(':')}:"$PATH"` : '';
  return `${ACTIVATE}${prefix}\n${script}`;
}

/** `timeout` inside the container too, so a hung engine is not the only backstop */
export function timeoutPrefix(timeoutMs: number | undefined): string[] {
  if (timeoutMs === undefined) return [];
  return ['timeout', '--signal=TERM', '--kill-after=5', `${Math.max(1, Math.ceil(timeoutMs / 1000))}`];
}

/** `exec` of a bash script inside the container, with the conda env active and a timeout inside too. */
export function buildExecArgs(
  engine: string,
  name: string,
  script: string,
  options: ExecOptions = {},
): string[] {
  const args = [engine, 'exec'];
  if (options.interactive) args.push('-i');
  args.push('-w', TESTBED);
  for (const [k, v] of Object.entries(options.env ?? {})) args.push('-e', `${k}=${v}`);
  args.push(name, ...timeoutPrefix(options.timeoutMs), 'bash', '-c', containerScript(script, options.path));
  return args;
}

/**
 * The environment set-up lines of the official eval script, in its order (SWE-bench/SWE-bench v4.1.0
 * swebench/harness/test_spec/python.py make_eval_script_list_py): the spec's eval_commands, the
 * safe.directory config, the conda env activated again, then the spec's install (a non-editable
 * reinstall for old Django, C extension rebuilds for scikit-learn and astropy). Only a container runs
 * them: they change the image's system and environment.
 */
export function envSetupLines(setup: EnvSetup): string[] {
  if (setup.evalCommands.length === 0 && setup.install === null) return [];
  return [
    ...setup.evalCommands,
    `git config --global --add safe.directory ${TESTBED}`,
    `cd ${TESTBED}`,
    ACTIVATE,
    ...(setup.install === null ? [] : [setup.install]),
  ];
}

export const WRITE_SCRIPT = 'mkdir -p "$(dirname "$1")" && cat > "$1"';

export function buildWriteArgs(engine: string, name: string, path: string): string[] {
  return [engine, 'exec', '-i', name, 'bash', '-c', WRITE_SCRIPT, 'write', path];
}

/** A harness started on the host but running inside: `exec -i` with the named variables passed through. */
export function buildHostCommand(engine: string, name: string, argv: string[], passEnv: string[]): string[] {
  return [engine, 'exec', '-i', '-w', TESTBED, ...passEnv.flatMap((n) => ['-e', n]), name, ...argv];
}

export function buildRemoveArgs(engine: string, name: string): string[] {
  return [engine, 'rm', '-f', name];
}

/** The command lines of one container engine. */
export interface ContainerDialect {
  engine: string;
  info(): string[];
  start(name: string, image: string, options: StartOptions): string[];
  exec(name: string, script: string, options: ExecOptions): string[];
  write(name: string, path: string): string[];
  /** the harness command line, and the environment of the engine's client that carries its variables */
  launch(
    name: string,
    argv: string[],
    passEnv: string[],
    env: Record<string, string>,
  ): { command: string[]; env: Record<string, string> };
  remove(name: string): string[];
  /** the image when none is given */
  defaultImage(instance: SweInstance): string;
}

export function dockerDialect(engine: 'docker' | 'podman'): ContainerDialect {
  return {
    engine,
    info: () => [engine, 'info', '--format', '{{.ServerVersion}}'],
    start: (name, image, o) => buildRunArgs(engine, name, image, o),
    exec: (name, script, o) => buildExecArgs(engine, name, script, o),
    write: (name, path) => buildWriteArgs(engine, name, path),
    // `-e NAME` copies the value from the client's environment: the command line carries names only
    launch: (name, argv, passEnv, env) => ({ command: buildHostCommand(engine, name, argv, passEnv), env }),
    remove: (name) => buildRemoveArgs(engine, name),
    defaultImage: (i) => i.image ?? officialImage(i.instance_id),
  };
}

const defaultRunner: Runner = (argv, options) => execTree(argv[0]!, argv.slice(1), options);

export class ContainerRuntime implements Runtime {
  readonly kind: string;
  readonly isolated = true;
  readonly placement = 'container';
  readonly engine: ContainerEngine;
  readonly dialect: ContainerDialect;
  private readonly runner: Runner;

  constructor(readonly options: ContainerRuntimeOptions = {}) {
    this.engine = options.engine ?? 'docker';
    this.kind = this.engine;
    if (this.engine === 'apptainer' && !options.dialect)
      throw new Error(
        'the apptainer runtime takes its dialect: apptainerDialect() (src/rollout/runtime/apptainer.ts)',
      );
    this.dialect = options.dialect ?? dockerDialect(this.engine as 'docker' | 'podman');
    this.runner = options.runner ?? defaultRunner;
  }

  imageFor(instance: SweInstance): string {
    return this.options.image?.(instance) ?? this.dialect.defaultImage(instance);
  }

  async check(): Promise<void> {
    const result = await this.runner(this.dialect.info(), { timeoutMs: 30_000 });
    if (result.exitCode !== 0) {
      throw new EnvironmentError(
        `${this.engine} is not usable: ${result.spawnError ?? result.output.trim().split('\n').pop() ?? 'no engine'}`,
        `start the ${this.engine} engine (\`${this.dialect.info().join(' ')}\` must work), or use --runtime sandbox`,
      );
    }
  }

  async prepare(instance: SweInstance, purpose: 'agent' | 'grade'): Promise<InstanceEnv> {
    const name = containerName(instance.instance_id, purpose, Math.random().toString(36).slice(2, 8));
    const host = (await this.options.hostEnvironments?.(instance, purpose)) ?? null;
    // the container's own folder on the host: harness config and the proxy's socket, never shared
    const folder = await makeTempDir(this.options.tmpRoot ?? tmpdir(), 'container');
    await mkdir(join(folder, 'harness'));
    await mkdir(join(folder, 'sock'));
    const mounts: Mount[] = [
      ...(this.options.mounts ?? []),
      ...(host?.mounts ?? []).map((m) => ({ host: m, container: m })),
      ...(this.options.harness ? [{ host: folder, container: folder, readonly: false }] : []),
    ];
    const argv = this.dialect.start(name, this.imageFor(instance), {
      ...this.options,
      network: this.options.network ?? 'none',
      mounts,
    });
    const run = await this.runner(argv, { timeoutMs: START_TIMEOUT_MS });
    if (run.exitCode !== 0) {
      await removeTempDir(folder);
      throw new RuntimeError(
        `cannot start ${this.imageFor(instance)}: ${run.output.trim().split('\n').pop() ?? ''}`,
      );
    }
    const env = new ContainerEnv(this.dialect, name, this.runner, folder, host, this.options);
    // the image's repository loses every ref, reflog and object HEAD does not reach
    const scrub = await env.exec(scrubLines(TESTBED).join(' && '), { timeoutMs: 15 * 60_000 });
    if (scrub.exitCode !== 0) {
      await env.dispose();
      throw new RuntimeError(
        `cannot strip the history of ${TESTBED} in ${this.imageFor(instance)}: ${scrub.output.trim().split('\n').pop() ?? ''}`,
      );
    }
    return env;
  }
}

class ContainerEnv implements InstanceEnv {
  readonly workdir = TESTBED;
  readonly scratch = '/tmp';
  readonly harnessDirBase?: string;

  constructor(
    private readonly dialect: ContainerDialect,
    readonly name: string,
    private readonly runner: Runner,
    private readonly folder: string,
    private readonly host: HostEnvironment | null,
    private readonly options: ContainerRuntimeOptions,
  ) {
    if (options.harness) this.harnessDirBase = join(folder, 'harness');
  }

  exec(script: string, options: EnvExecOptions = {}) {
    const argv = this.dialect.exec(this.name, script, {
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      env: { ...this.host?.env, ...options.env },
      interactive: options.input !== undefined,
      path: this.host?.path ?? [],
    });
    // the host-side limit is a backstop for a hung engine; the in-container `timeout` kills the tree
    const backstop = options.timeoutMs === undefined ? undefined : options.timeoutMs + 15_000;
    // a cancel ends the engine's client; the process in the container ends when the container is removed
    const signal = options.signal ? { signal: options.signal } : {};
    return this.runner(argv, { input: options.input, timeoutMs: backstop, ...signal }).then((r) =>
      r.exitCode === 124 || r.exitCode === 137 ? { ...r, timedOut: true } : r,
    );
  }

  async writeFile(path: string, content: string): Promise<void> {
    const target = path.startsWith('/') ? path : `${TESTBED}/${path}`;
    const r = await this.runner(this.dialect.write(this.name, target), { input: content, timeoutMs: 60_000 });
    if (r.exitCode !== 0) throw new RuntimeError(`cannot write ${target}: ${r.output.trim()}`);
  }

  async launchHarness(request: HarnessLaunchRequest): Promise<HarnessLaunch> {
    let bridge: Bridge | null = null;
    let argv = request.argv;
    if (this.options.network !== 'host') {
      // the container's root (or, rootless, the user) connects; the folder itself is the user's, 0700
      const target = hostPort(request.proxyUrl);
      bridge = await openBridge(join(this.folder, 'sock', 'port-0.sock'), target, undefined, 0o666);
      argv = [CONTAINER_NODE, CONTAINER_FORWARDER, `${target.port}=${bridge.socket}`, '--', ...argv];
    }
    const launched = this.dialect.launch(this.name, argv, request.passEnv, request.env);
    return {
      ...launched,
      cwd: tmpdir(),
      close: async () => bridge?.close(),
      // polar dead: its watchdog removes the container, and the harness in it (killing the exec client does not)
      orphaned: this.dialect.remove(this.name),
    };
  }

  envSetup(setup: EnvSetup): string[] {
    return envSetupLines(setup);
  }

  async limitHit(end: RunEnd): Promise<LimitHit | null> {
    return classifyEnd(end);
  }

  async dispose(): Promise<void> {
    await this.runner(this.dialect.remove(this.name), { timeoutMs: 60_000 });
    await removeTempDir(this.folder);
  }
}
