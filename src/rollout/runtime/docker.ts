/**
 * The container runtime (docker, or podman through the same commands): one container per prepare from
 * the instance image (the row's `image`, else the official `swebench/sweb.eval.x86_64.<id with __ ->
 * _1776_>:latest`), workdir /testbed, the conda env `testbed` activated for every command, the harness
 * mounted read-only, host networking so the capture proxy on 127.0.0.1 is reachable from inside.
 * Every command line is built by a pure function, so they are unit-tested without an engine.
 */
import { tmpdir } from 'node:os';
import { EnvironmentError } from '../../errors.ts';
import { DEFAULTS } from '../../options/defaults.ts';
import type { SweInstance } from '../dataset.ts';
import { type ExecResult, execTree } from '../exec.ts';
import type { EnvSetup } from '../specs.ts';
import { type EnvExecOptions, type InstanceEnv, type Runtime, RuntimeError } from './types.ts';

export interface Mount {
  host: string;
  container: string;
  readonly?: boolean;
}

export interface ContainerRuntimeOptions {
  engine?: 'docker' | 'podman';
  /** image for an instance; default: the row's image, else the official SWE-bench name */
  image?: (instance: SweInstance) => string;
  /** 'host' (default: the proxy on 127.0.0.1 is reachable as is) or a network name */
  network?: string;
  platform?: string;
  mounts?: Mount[];
  /**
   * a host dir mounted writable at the same path: where harness config dirs are made so a harness in the
   * container reads them (InstanceEnv.harnessDirBase)
   */
  harnessDirBase?: string;
  env?: Record<string, string>;
  /** runs engine commands; injected in tests */
  runner?: (argv: string[], options: { input?: string; timeoutMs?: number }) => Promise<ExecResult>;
}

export const TESTBED = '/testbed';
/** `run` may pull a multi-GB SWE-bench image first */
const START_TIMEOUT_MS = 30 * 60_000;
const ACTIVATE =
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

export function buildRunArgs(
  engine: string,
  name: string,
  image: string,
  options: Pick<ContainerRuntimeOptions, 'network' | 'platform' | 'mounts' | 'env'>,
): string[] {
  const args = [engine, 'run', '-d', '--rm', '--name', name, '-w', TESTBED];
  args.push('--network', options.network ?? DEFAULTS.containerNetwork.value);
  args.push('--platform', options.platform ?? 'linux/amd64');
  for (const m of options.mounts ?? [])
    args.push('-v', `${m.host}:${m.container}${m.readonly === false ? '' : ':ro'}`);
  for (const [k, v] of Object.entries(options.env ?? {})) args.push('-e', `${k}=${v}`);
  args.push('--entrypoint', 'tail', image, '-f', '/dev/null');
  return args;
}

/** `exec` of a bash script inside the container, with the conda env active and a timeout inside too. */
export function buildExecArgs(
  engine: string,
  name: string,
  script: string,
  options: { timeoutMs?: number; env?: Record<string, string>; interactive?: boolean } = {},
): string[] {
  const args = [engine, 'exec'];
  if (options.interactive) args.push('-i');
  args.push('-w', TESTBED);
  for (const [k, v] of Object.entries(options.env ?? {})) args.push('-e', `${k}=${v}`);
  args.push(name);
  if (options.timeoutMs !== undefined) {
    args.push(
      'timeout',
      '--signal=TERM',
      '--kill-after=5',
      `${Math.max(1, Math.ceil(options.timeoutMs / 1000))}`,
    );
  }
  args.push('bash', '-c', `${ACTIVATE}\n${script}`);
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

export function buildWriteArgs(engine: string, name: string, path: string): string[] {
  return [
    engine,
    'exec',
    '-i',
    name,
    'bash',
    '-c',
    'mkdir -p "$(dirname "$1")" && cat > "$1"',
    'write',
    path,
  ];
}

/** A harness started on the host but running inside: `exec -i` with the named variables passed through. */
export function buildHostCommand(engine: string, name: string, argv: string[], passEnv: string[]): string[] {
  return [engine, 'exec', '-i', '-w', TESTBED, ...passEnv.flatMap((n) => ['-e', n]), name, ...argv];
}

export function buildRemoveArgs(engine: string, name: string): string[] {
  return [engine, 'rm', '-f', name];
}

const defaultRunner: NonNullable<ContainerRuntimeOptions['runner']> = (argv, options) =>
  execTree(argv[0]!, argv.slice(1), options);

export class ContainerRuntime implements Runtime {
  readonly kind: string;
  readonly isolated = true;
  readonly engine: 'docker' | 'podman';
  private readonly runner: NonNullable<ContainerRuntimeOptions['runner']>;

  constructor(readonly options: ContainerRuntimeOptions = {}) {
    this.engine = options.engine ?? 'docker';
    this.kind = this.engine;
    this.runner = options.runner ?? defaultRunner;
  }

  /** the mounts of every container: the configured ones, then the harness dir base (writable) */
  get mounts(): Mount[] {
    const base = this.options.harnessDirBase;
    return [
      ...(this.options.mounts ?? []),
      ...(base ? [{ host: base, container: base, readonly: false }] : []),
    ];
  }

  imageFor(instance: SweInstance): string {
    return this.options.image?.(instance) ?? instance.image ?? officialImage(instance.instance_id);
  }

  async check(): Promise<void> {
    const result = await this.runner([this.engine, 'info', '--format', '{{.ServerVersion}}'], {
      timeoutMs: 30_000,
    });
    if (result.exitCode !== 0) {
      throw new EnvironmentError(
        `${this.engine} is not usable: ${result.spawnError ?? result.output.trim().split('\n').pop() ?? 'no engine'}`,
        `start the ${this.engine} engine (\`${this.engine} info\` must work), or use --runtime local`,
      );
    }
  }

  async prepare(instance: SweInstance, purpose: 'agent' | 'grade'): Promise<InstanceEnv> {
    const name = containerName(instance.instance_id, purpose, Math.random().toString(36).slice(2, 8));
    const argv = buildRunArgs(this.engine, name, this.imageFor(instance), {
      ...this.options,
      mounts: this.mounts,
    });
    const run = await this.runner(argv, {
      timeoutMs: START_TIMEOUT_MS,
    });
    if (run.exitCode !== 0) {
      throw new RuntimeError(
        `cannot start ${this.imageFor(instance)}: ${run.output.trim().split('\n').pop() ?? ''}`,
      );
    }
    return new ContainerEnv(this.engine, name, this.runner, this.options.harnessDirBase);
  }
}

class ContainerEnv implements InstanceEnv {
  readonly workdir = TESTBED;
  readonly scratch = '/tmp';

  constructor(
    private readonly engine: string,
    readonly name: string,
    private readonly runner: NonNullable<ContainerRuntimeOptions['runner']>,
    readonly harnessDirBase?: string,
  ) {}

  exec(script: string, options: EnvExecOptions = {}) {
    const argv = buildExecArgs(this.engine, this.name, script, {
      timeoutMs: options.timeoutMs,
      env: options.env,
      interactive: options.input !== undefined,
    });
    // the host-side limit is a backstop for a hung engine; the in-container `timeout` kills the tree
    const backstop = options.timeoutMs === undefined ? undefined : options.timeoutMs + 15_000;
    return this.runner(argv, { input: options.input, timeoutMs: backstop }).then((r) =>
      r.exitCode === 124 || r.exitCode === 137 ? { ...r, timedOut: true } : r,
    );
  }

  async writeFile(path: string, content: string): Promise<void> {
    const target = path.startsWith('/') ? path : `${TESTBED}/${path}`;
    const r = await this.runner(buildWriteArgs(this.engine, this.name, target), {
      input: content,
      timeoutMs: 60_000,
    });
    if (r.exitCode !== 0) throw new RuntimeError(`cannot write ${target}: ${r.output.trim()}`);
  }

  hostCommand(argv: string[], passEnv: string[]): { command: string[]; cwd: string } {
    return { command: buildHostCommand(this.engine, this.name, argv, passEnv), cwd: tmpdir() };
  }

  reachHost(url: string): string {
    return url; // host networking
  }

  envSetup(setup: EnvSetup): string[] {
    return envSetupLines(setup);
  }

  async dispose(): Promise<void> {
    await this.runner(buildRemoveArgs(this.engine, this.name), { timeoutMs: 60_000 });
  }
}
