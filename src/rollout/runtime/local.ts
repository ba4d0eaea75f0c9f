/**
 * The local runtime: a fresh tree of base_commit in a temp dir, commands run on this machine with
 * no isolation (a convenience runtime for trusted agents, not a sandbox). The tree is a copy of the
 * pristine checkout (tree.ts) of the history repository of (DIR/<owner>/<name>, base_commit)
 * (history.ts), so it holds base_commit's ancestors and the tags that point at them, nothing later.
 * With `environments` (src/rollout/env/), an instance whose spec or row asks for a Python environment gets the
 * cached one (built on demand) and a per-sample layer in the temp dir: every command runs with the
 * layer and the environment first on PATH, then the host environments (--env-dir).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import type { SweInstance } from '../dataset.ts';
import type { Environments } from '../env/build.ts';
import { environmentView, layerDir, sampleEnvironment } from '../env/layer.ts';
import { isSystemStep } from '../env/recipe.ts';
import type { SampleEnvironment } from '../env/types.ts';
import { execTree, gitEnv } from '../exec.ts';
import type { EnvSetup } from '../specs.ts';
import { makeTempDir, removeTempDir } from '../temp-dirs.ts';
import { checkSourceRepos, type HistoryStore, historyStore, sourceRepo } from './history.ts';
import { COPY_SCRIPT } from './tree.ts';
import {
  type EnvExecOptions,
  type EnvironmentResolver,
  type HarnessLaunchRequest,
  type HostEnvironment,
  hostLaunch,
  type InstanceEnv,
  joinHostEnvironments,
  type Runtime,
  RuntimeError,
} from './types.ts';

export interface LocalRuntimeOptions {
  /** where DIR/<owner>/<name> git repositories live */
  reposDir: string;
  /** parent of the temp dirs (default os.tmpdir()) */
  tmpRoot?: string;
  /** keep the temp dirs (debugging) */
  keep?: boolean;
  /** extra environment for every command */
  env?: Record<string, string>;
  /** builds and caches the instances' Python environments (absent: tests run in polar's own environment) */
  environments?: Environments;
  /** host environments (types.ts, --env-dir): their bin dirs go first on PATH */
  hostEnvironments?: EnvironmentResolver;
  /** the history repositories (default: the process's store) */
  history?: HistoryStore;
}

export class LocalRuntime implements Runtime {
  readonly kind = 'local';
  readonly isolated = false;
  readonly options: LocalRuntimeOptions;

  constructor(options: LocalRuntimeOptions) {
    this.options = { ...options, reposDir: resolve(options.reposDir) };
  }

  get environments(): Environments | undefined {
    return this.options.environments;
  }

  repoPath(repo: string): string {
    return sourceRepo(this.options.reposDir, repo);
  }

  async check(instances: SweInstance[]): Promise<void> {
    checkSourceRepos('local', this.options.reposDir, instances);
  }

  async prepare(instance: SweInstance, purpose: 'agent' | 'grade'): Promise<InstanceEnv> {
    // the environment first: a build that fails costs no checkout
    const cached = (await this.options.environments?.forInstance(instance)) ?? null;
    const lease = await (this.options.history ?? historyStore()).acquire(
      this.repoPath(instance.repo),
      instance.base_commit,
    );
    const root = await makeTempDir(this.options.tmpRoot ?? tmpdir(), 'eval', { keep: this.options.keep });
    const workdir = join(root, 'repo');
    const gitconfig = join(root, 'gitconfig');
    await writeFile(gitconfig, '');
    try {
      const result = await execTree('bash', ['-c', COPY_SCRIPT, 'prepare', lease.tree, workdir], {
        env: gitEnv(gitconfig),
        timeoutMs: 120_000,
      });
      if (result.exitCode !== 0) {
        throw new RuntimeError(
          `cannot check out ${instance.repo} at ${instance.base_commit}: ${result.output.trim().split('\n').pop() ?? ''}`,
        );
      }
      const host = joinHostEnvironments(
        cached ? environmentView(cached, layerDir(root)) : null,
        (await this.options.hostEnvironments?.(instance, purpose)) ?? null,
      );
      const env = new LocalEnv(root, workdir, this.options, host, cached !== null, () => lease.release());
      if (cached) env.environment = sampleEnvironment(cached, env);
      return env;
    } catch (error) {
      lease.release();
      await removeTempDir(root);
      throw error;
    }
  }
}

class LocalEnv implements InstanceEnv {
  readonly scratch: string;
  environment?: SampleEnvironment;
  patchBase?: string;

  constructor(
    private readonly root: string,
    readonly workdir: string,
    private readonly options: LocalRuntimeOptions,
    private readonly host: HostEnvironment | null,
    private readonly built: boolean,
    private readonly release: () => void,
  ) {
    this.scratch = root;
  }

  get hostTree(): string {
    return this.workdir;
  }

  /** the host environments' PATH and variables; PYTHONPATH and PYTHONHOME of polar's own process are not passed on */
  private hostEnv(path: string): Record<string, string | undefined> {
    if (!this.host) return {};
    return {
      ...this.host.env,
      ...(this.host.path.length ? { PATH: [...this.host.path, path].join(':') } : {}),
      ...(this.built ? { PYTHONPATH: undefined, PYTHONHOME: undefined } : {}),
    };
  }

  exec(script: string, options: EnvExecOptions = {}) {
    return execTree('bash', ['-c', script], {
      cwd: this.workdir,
      env: {
        ...gitEnv(join(this.root, 'gitconfig')),
        PYTHONDONTWRITEBYTECODE: '1',
        ...this.hostEnv(process.env.PATH ?? ''),
        ...this.options.env,
        ...options.env,
      },
      timeoutMs: options.timeoutMs,
      input: options.input,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  }

  async writeFile(path: string, content: string): Promise<void> {
    const target = isAbsolute(path) ? path : join(this.workdir, path);
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, content);
  }

  /**
   * With a polar-built environment, the spec's eval_commands that only set the test run's environment
   * (Django's LANG / LC_ALL exports) run as in the official script; those that change this machine
   * (locale-gen) do not, and the install is the environment's per-sample step. Without one: nothing.
   */
  envSetup(setup: EnvSetup): string[] {
    return this.built ? setup.evalCommands.filter((c) => !isSystemStep(c)) : [];
  }

  async launchHarness(request: HarnessLaunchRequest) {
    const launch = hostLaunch(request, this.workdir);
    const extra = this.hostEnv(launch.env.PATH ?? '');
    const env: Record<string, string> = { ...launch.env };
    for (const [k, v] of Object.entries(extra)) {
      if (v === undefined) delete env[k];
      else env[k] = v;
    }
    launch.env = env;
    return launch;
  }

  async dispose(): Promise<void> {
    this.release();
    if (!this.options.keep) await removeTempDir(this.root);
  }
}
