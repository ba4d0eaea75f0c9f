import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import type { SweInstance } from '../dataset.ts';
import { execTree, gitEnv } from '../exec.ts';
import { CHECKOUT_SCRIPT, checkSourceRepos, type HistoryStore, historyStore, sourceRepo } from './history.ts';
import {
  type EnvExecOptions,
  type EnvironmentResolver,
  type HarnessLaunchRequest,
  type HostEnvironment,
  hostLaunch,
  type InstanceEnv,
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
  /** host environments (types.ts): their bin dirs go first on PATH */
  environments?: EnvironmentResolver;
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

  repoPath(repo: string): string {
    return sourceRepo(this.options.reposDir, repo);
  }

  async check(instances: SweInstance[]): Promise<void> {
    checkSourceRepos('local', this.options.reposDir, instances);
  }

  async prepare(instance: SweInstance, purpose: 'agent' | 'grade'): Promise<InstanceEnv> {
    const lease = await (this.options.history ?? historyStore()).acquire(
      this.repoPath(instance.repo),
      instance.base_commit,
    );
    const root = await mkdtemp(join(this.options.tmpRoot ?? tmpdir(), 'polar-eval-'));
    const workdir = join(root, 'repo');
    const gitconfig = join(root, 'gitconfig');
    await writeFile(gitconfig, '');
    try {
      const result = await execTree(
        'bash',
        ['-c', CHECKOUT_SCRIPT, 'prepare', lease.path, workdir, instance.base_commit],
        { env: gitEnv(gitconfig), timeoutMs: 120_000 },
      );
      if (result.exitCode !== 0) {
        throw new RuntimeError(
          `cannot check out ${instance.repo} at ${instance.base_commit}: ${result.output.trim().split('\n').pop() ?? ''}`,
        );
      }
      const host = (await this.options.environments?.(instance, purpose)) ?? null;
      return new LocalEnv(root, workdir, this.options, host, () => lease.release());
    } catch (error) {
      lease.release();
      await rm(root, { recursive: true, force: true });
      throw error;
    }
  }
}

class LocalEnv implements InstanceEnv {
  readonly scratch: string;

  constructor(
    private readonly root: string,
    readonly workdir: string,
    private readonly options: LocalRuntimeOptions,
    private readonly host: HostEnvironment | null,
    private readonly release: () => void,
  ) {
    this.scratch = root;
  }

  exec(script: string, options: EnvExecOptions = {}) {
    const path = this.host?.path.length
      ? { PATH: [...this.host.path, process.env.PATH ?? ''].join(':') }
      : {};
    return execTree('bash', ['-c', script], {
      cwd: this.workdir,
      env: {
        ...gitEnv(join(this.root, 'gitconfig')),
        PYTHONDONTWRITEBYTECODE: '1',
        ...path,
        ...this.host?.env,
        ...this.options.env,
        ...options.env,
      },
      timeoutMs: options.timeoutMs,
      input: options.input,
    });
  }

  async writeFile(path: string, content: string): Promise<void> {
    const target = isAbsolute(path) ? path : join(this.workdir, path);
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, content);
  }

  async launchHarness(request: HarnessLaunchRequest) {
    const launch = hostLaunch(request, this.workdir);
    if (this.host?.path.length)
      launch.env = {
        ...launch.env,
        ...this.host.env,
        PATH: [...this.host.path, launch.env.PATH ?? ''].join(':'),
      };
    return launch;
  }

  async dispose(): Promise<void> {
    this.release();
    if (!this.options.keep) await rm(this.root, { recursive: true, force: true });
  }
}
