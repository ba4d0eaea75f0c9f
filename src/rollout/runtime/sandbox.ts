/**
 * The sandbox runtime (`--runtime sandbox`, the default for harness agents): every environment is a
 * private folder on this host (repository, scratch, home, harness config, sockets), and every command
 * in it runs in a fresh bubblewrap sandbox (bwrap.ts) that sees the system read-only, its own
 * repository writable at /testbed, a private /tmp and $HOME, and nothing else: not the user's home,
 * not `--repos`, not other samples, not polar's captures. No network but a loopback; the capture proxy
 * is reached through a Unix socket and a forwarder on the sandbox's 127.0.0.1 (bridge.ts, forward.mjs),
 * so a harness keeps its `http://127.0.0.1:PORT` config. Limits: limits.ts. The repository holds no
 * history after base_commit (history.ts).
 */
import { realpathSync } from 'node:fs';
import { chmod, chown, mkdir, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EnvironmentError } from '../../errors.ts';
import type { SweInstance } from '../dataset.ts';
import type { Environments } from '../env/build.ts';
import { environmentView, layerDir, sampleEnvironment } from '../env/layer.ts';
import { isSystemStep } from '../env/recipe.ts';
import type { SampleEnvironment } from '../env/types.ts';
import { type ExecResult, execTree, gitEnv } from '../exec.ts';
import type { EnvSetup } from '../specs.ts';
import { makeTempDir, removeTempDir } from '../temp-dirs.ts';
import { type Bridge, hostPort, openBridge } from './bridge.ts';
import { type Bind, bwrapArgs, inCgroup, type SandboxSpec, systemLayout } from './bwrap.ts';
import {
  checkSourceRepos,
  type HistoryLease,
  type HistoryStore,
  historyStore,
  sourceRepo,
} from './history.ts';
import { checkCgroupParent, classifyEnd, SandboxCgroup } from './limits.ts';
import { probeSandbox } from './probe.ts';
import { COPY_SCRIPT } from './tree.ts';
import {
  type EnvExecOptions,
  type EnvironmentResolver,
  type HarnessLaunch,
  type HarnessLaunchRequest,
  type HostEnvironment,
  type InstanceEnv,
  joinHostEnvironments,
  type LimitHit,
  type Limits,
  type RunEnd,
  type Runtime,
  RuntimeError,
} from './types.ts';

export const SANDBOX_TESTBED = '/testbed';
export const SANDBOX_SCRATCH = '/polar/scratch';
export const SANDBOX_HOME = '/home/sandbox';
const SANDBOX_SOCKETS = '/polar/sock';
export const FORWARDER = fileURLToPath(new URL('./forward.mjs', import.meta.url));
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface SandboxRuntimeOptions {
  /** where DIR/<owner>/<name> git repositories live (never visible inside) */
  reposDir: string;
  /** parent of the environments' folders (default os.tmpdir()) */
  tmpRoot?: string;
  /** keep the folders (debugging) */
  keep?: boolean;
  limits?: Limits;
  /** 'none' (default): loopback only; 'host': the host's network (unsafe) */
  network?: 'none' | 'host';
  /** host TCP addresses reachable inside at 127.0.0.1 on the same port (unsafe: each is a way out) */
  allow?: Array<{ host: string; port: number }>;
  /** node_modules to mount for a harness (polar's own); absent: no harness runs here */
  harnessModules?: string;
  /**
   * builds and caches the instances' Python environments (src/rollout/env/): bound read-only at the same path,
   * the per-sample layer in the sandbox's scratch
   */
  environments?: Environments;
  /** host environments (types.ts, --env-dir): read-only at the same path, first on PATH after the built one */
  hostEnvironments?: EnvironmentResolver;
  history?: HistoryStore;
  /** a delegated cgroup v2 directory: limits by cgroup instead of rlimits */
  cgroupParent?: string;
  /** the bwrap binary (default: bwrap on PATH) */
  bwrap?: string;
  /**
   * replay the install of the unpatched tree where a patch touches nothing it read (env/install-memo.ts;
   * default true): false runs every sample's install (the benchmark's baseline)
   */
  installMemo?: boolean;
}

/** root mode gives every environment a uid of its own: RLIMIT_NPROC counts per uid, and root is exempt */
function sandboxUid(): number {
  return 1_000_000_000 + Math.floor(Math.random() * 2 ** 28);
}

export class SandboxRuntime implements Runtime {
  readonly kind = 'sandbox';
  readonly isolated = true;
  readonly options: SandboxRuntimeOptions;
  readonly mode: 'user' | 'root' = process.getuid?.() === 0 ? 'root' : 'user';
  private checked: Promise<void> | undefined;

  constructor(options: SandboxRuntimeOptions) {
    this.options = { ...options, reposDir: resolve(options.reposDir) };
  }

  get environments(): Environments | undefined {
    return this.options.environments;
  }

  repoPath(repo: string): string {
    return sourceRepo(this.options.reposDir, repo);
  }

  async check(instances: SweInstance[]): Promise<void> {
    checkSourceRepos('sandbox', this.options.reposDir, instances);
    if (this.options.cgroupParent) {
      const cgroup = await checkCgroupParent(this.options.cgroupParent);
      if (!cgroup.ok)
        throw new EnvironmentError(
          `--cgroup-parent: ${cgroup.why}`,
          'leave it out to limit by rlimits, or see polar doctor --runtime sandbox --cgroup-parent DIR',
        );
    }
    this.checked ??= probeSandbox({ bwrap: this.options.bwrap, network: this.options.network }).then(
      (probe) => {
        if (!probe.ok)
          throw new EnvironmentError(`the sandbox does not work here: ${probe.error}`, probe.fix);
      },
    );
    await this.checked;
  }

  async prepare(instance: SweInstance, purpose: 'agent' | 'grade'): Promise<InstanceEnv> {
    // the environment first: a build that fails costs no checkout
    const cached = (await this.options.environments?.forInstance(instance)) ?? null;
    const lease = await (this.options.history ?? historyStore()).acquire(
      this.repoPath(instance.repo),
      instance.base_commit,
    );
    const root = await makeTempDir(this.options.tmpRoot ?? tmpdir(), 'sandbox', { keep: this.options.keep });
    const uid = this.mode === 'root' ? sandboxUid() : null;
    const owner = uid === null ? null : { uid, gid: uid };
    let cgroup: SandboxCgroup | null = null;
    try {
      for (const dir of ['repo', 'scratch', 'home', 'harness', 'sock']) {
        await mkdir(join(root, dir), { mode: 0o700 });
        if (owner) await chown(join(root, dir), owner.uid, owner.gid);
      }
      await writeFile(join(root, 'home/.gitconfig'), '[safe]\n\tdirectory = *\n');
      if (owner) await chown(join(root, 'home/.gitconfig'), owner.uid, owner.gid);
      if (this.options.cgroupParent && this.options.limits)
        cgroup = await SandboxCgroup.create(
          this.options.cgroupParent,
          `polar-${root.split('-').pop()}`,
          this.options.limits,
        );
      const host = joinHostEnvironments(
        cached ? environmentView(cached, layerDir(SANDBOX_SCRATCH)) : null,
        (await this.options.hostEnvironments?.(instance, purpose)) ?? null,
      );
      const env = new SandboxEnv(this, root, lease, host, owner?.uid ?? null, cgroup, cached !== null);
      const checkout = await env.exec(COPY_SCRIPT, {
        args: [lease.tree, SANDBOX_TESTBED],
        timeoutMs: 120_000,
      });
      if (checkout.exitCode !== 0) {
        throw new RuntimeError(
          `cannot check out ${instance.repo} at ${instance.base_commit} in the sandbox: ${checkout.output.trim().split('\n').pop() ?? ''}`,
          'polar doctor --runtime sandbox checks the sandbox',
        );
      }
      if (cached)
        env.environment = sampleEnvironment(cached, env, {
          // the same paths in every sample: the install of the unpatched tree replays (install-memo.ts)
          memo:
            this.options.installMemo === false
              ? undefined
              : {
                  place: {
                    repo: instance.repo,
                    baseCommit: instance.base_commit,
                    tree: SANDBOX_TESTBED,
                    layer: layerDir(SANDBOX_SCRATCH),
                  },
                  host: { tree: join(root, 'repo'), scratch: join(root, 'scratch') },
                },
        });
      return env;
    } catch (error) {
      lease.release();
      await cgroup?.remove();
      await removeTempDir(root);
      throw error;
    }
  }
}

class SandboxEnv implements InstanceEnv {
  readonly workdir = SANDBOX_TESTBED;
  readonly scratch = SANDBOX_SCRATCH;
  readonly harnessDirBase: string;
  readonly hostTree: string;
  environment?: SampleEnvironment;
  patchBase?: string;

  constructor(
    private readonly runtime: SandboxRuntime,
    private readonly root: string,
    private readonly lease: HistoryLease,
    private readonly host: HostEnvironment | null,
    private readonly uid: number | null,
    private readonly cgroup: SandboxCgroup | null,
    private readonly built: boolean,
  ) {
    this.harnessDirBase = join(root, 'harness');
    this.hostTree = join(root, 'repo');
  }

  /** what every command sees besides the system: its folders, the history, the host environments */
  private binds(harness: boolean): Bind[] {
    const o = this.runtime.options;
    const binds: Bind[] = [
      { host: join(this.root, 'repo'), inside: SANDBOX_TESTBED, writable: true },
      { host: join(this.root, 'scratch'), inside: SANDBOX_SCRATCH, writable: true },
      { host: join(this.root, 'home'), inside: SANDBOX_HOME, writable: true },
      { host: this.lease.path, inside: this.lease.path },
      // the pristine tree each sample's tree is copied from (read-only: the base_commit it already has)
      { host: this.lease.tree, inside: this.lease.tree },
      ...(this.host?.mounts ?? []).map((m) => ({ host: m, inside: m })),
    ];
    if (!process.execPath.startsWith('/usr/'))
      binds.push({ host: process.execPath, inside: process.execPath });
    if (harness) {
      binds.push(
        { host: this.harnessDirBase, inside: this.harnessDirBase, writable: true },
        { host: join(this.root, 'sock'), inside: SANDBOX_SOCKETS },
        { host: FORWARDER, inside: FORWARDER },
      );
      if (o.harnessModules) {
        binds.push({ host: o.harnessModules, inside: o.harnessModules });
        const real = realpathSync(o.harnessModules);
        if (real !== o.harnessModules) binds.push({ host: real, inside: real });
      }
    }
    return binds;
  }

  private spec(harness: boolean): SandboxSpec {
    const o = this.runtime.options;
    return {
      mode: this.runtime.mode,
      ...(this.uid !== null ? { uid: this.uid } : {}),
      system: systemLayout(),
      binds: this.binds(harness),
      chdir: SANDBOX_TESTBED,
      network: o.network ?? 'none',
      // with a cgroup the memory and process limits are the cgroup's; the file size limit stays an rlimit
      limits: this.cgroup ? { diskBytes: o.limits?.diskBytes } : (o.limits ?? {}),
      ...(o.limits?.diskBytes ? { tmpBytes: o.limits.diskBytes } : {}),
      ...(o.bwrap ? { bwrap: o.bwrap } : {}),
    };
  }

  /** the environment every command starts from (bwrap passes its own environment on) */
  private baseEnv(): Record<string, string> {
    const path = [...(this.host?.path ?? []), dirname(process.execPath), SYSTEM_PATH].join(':');
    return {
      ...gitEnv(`${SANDBOX_HOME}/.gitconfig`),
      PATH: path,
      HOME: SANDBOX_HOME,
      USER: 'sandbox',
      LOGNAME: 'sandbox',
      LANG: 'C.UTF-8',
      TMPDIR: '/tmp',
      PWD: SANDBOX_TESTBED,
      XDG_CONFIG_HOME: `${SANDBOX_HOME}/.config`,
      XDG_CACHE_HOME: `${SANDBOX_HOME}/.cache`,
      XDG_DATA_HOME: `${SANDBOX_HOME}/.local/share`,
      XDG_STATE_HOME: `${SANDBOX_HOME}/.local/state`,
      PYTHONDONTWRITEBYTECODE: '1',
      ...this.host?.env,
    };
  }

  private argv(harness: boolean, command: string[]): string[] {
    const args = bwrapArgs(this.spec(harness), command);
    return this.cgroup ? inCgroup(this.cgroup.procs, args) : args;
  }

  exec(script: string, options: EnvExecOptions & { args?: string[] } = {}): Promise<ExecResult> {
    const [file, ...rest] = this.argv(false, ['bash', '-c', script, 'polar', ...(options.args ?? [])]);
    return execTree(file!, rest, {
      cwd: this.root,
      env: { ...this.baseEnv(), ...options.env },
      extendEnv: false,
      timeoutMs: options.timeoutMs,
      input: options.input,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  }

  async writeFile(path: string, content: string): Promise<void> {
    // written from inside, as the sandbox's user: a symlink the agent left can point only inside
    const target = path.startsWith('/') ? path : `${SANDBOX_TESTBED}/${path}`;
    const r = await this.exec('mkdir -p "$(dirname "$1")" && cat > "$1"', {
      args: [target],
      input: content,
      timeoutMs: 60_000,
    });
    if (r.exitCode !== 0) throw new RuntimeError(`cannot write ${target}: ${r.output.trim()}`);
  }

  /** as the local runtime: with a polar-built environment, the eval_commands that change no system files */
  envSetup(setup: EnvSetup): string[] {
    return this.built ? setup.evalCommands.filter((c) => !isSystemStep(c)) : [];
  }

  async launchHarness(request: HarnessLaunchRequest): Promise<HarnessLaunch> {
    const o = this.runtime.options;
    if (this.uid !== null) await chownTree(request.runDir, this.uid);
    const bridges: Bridge[] = [];
    const forwards: string[] = [];
    const owner = this.uid !== null ? { uid: this.uid, gid: this.uid } : undefined;
    const close = async () => {
      await Promise.all(bridges.map((b) => b.close()));
    };
    try {
      if ((o.network ?? 'none') === 'none') {
        const targets = [hostPort(request.proxyUrl), ...(o.allow ?? [])];
        for (const [i, target] of targets.entries()) {
          const name = `port-${i}.sock`;
          bridges.push(await openBridge(join(this.root, 'sock', name), target, owner));
          forwards.push(`${target.port}=${SANDBOX_SOCKETS}/${name}`);
        }
      }
    } catch (error) {
      await close();
      throw error;
    }
    const inner = forwards.length
      ? [process.execPath, FORWARDER, ...forwards, '--', ...request.argv]
      : request.argv;
    const env = { ...request.env, ...this.baseEnv() };
    delete env.XDG_RUNTIME_DIR;
    return { command: this.argv(true, inner), cwd: this.root, env, close };
  }

  async limitHit(end: RunEnd): Promise<LimitHit | null> {
    return classifyEnd(end, this.cgroup ? await this.cgroup.events() : null);
  }

  async dispose(): Promise<void> {
    this.lease.release();
    await this.cgroup?.remove();
    // (removeTempDir gets through directories a sandboxed agent made unwritable)
    if (!this.runtime.options.keep) await removeTempDir(this.root);
  }
}

/** hands a host folder polar made (the harness's run dir) to the sandbox's uid */
async function chownTree(dir: string, uid: number): Promise<void> {
  await chown(dir, uid, uid);
  await chmod(dir, 0o700);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await chownTree(path, uid);
    else await chown(path, uid, uid);
  }
}
