/**
 * The local runtime: a fresh copy of DIR/<owner>/<name> at base_commit in a temp dir, commands run on
 * this machine with no isolation. The copy shares objects with the source (`git clone --shared`), so
 * it costs a checkout, not a copy of history; branches, the remote and the tags of commits that are not
 * ancestors of base_commit are removed so the agent does not see later commits through refs (the
 * objects stay reachable by hash: this is a convenience runtime for trusted agents, not a sandbox).
 * With `environments` (src/env/), an instance whose spec or row asks for a Python environment gets the
 * cached one (built on demand) and a per-sample layer in the temp dir: every command runs with the
 * layer and the environment first on PATH.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import type { Environments } from '../../env/build.ts';
import { environmentView, layerDir, sampleEnvironment } from '../../env/layer.ts';
import { isSystemStep } from '../../env/recipe.ts';
import type { EnvironmentView, SampleEnvironment } from '../../env/types.ts';
import { EnvironmentError } from '../../errors.ts';
import { insideDir } from '../../util/safe-path.ts';
import type { SweInstance } from '../dataset.ts';
import { execTree, gitEnv } from '../exec.ts';
import type { EnvSetup } from '../specs.ts';
import { type EnvExecOptions, type InstanceEnv, type Runtime, RuntimeError } from './types.ts';

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
}

export class LocalRuntime implements Runtime {
  readonly kind = 'local';
  readonly isolated = false;
  readonly options: LocalRuntimeOptions;

  constructor(options: LocalRuntimeOptions) {
    this.options = { ...options, reposDir: resolve(options.reposDir) };
  }

  repoPath(repo: string): string {
    // (a row's repo is owner/name of safe names; the resolved path is checked anyway)
    return insideDir(this.options.reposDir, ...repo.split('/'));
  }

  async check(instances: SweInstance[]): Promise<void> {
    const missing = [...new Set(instances.map((i) => i.repo))].filter((r) => !existsSync(this.repoPath(r)));
    if (missing.length > 0) {
      throw new EnvironmentError(
        `local runtime: no repository for ${missing.slice(0, 3).join(', ')} under ${this.options.reposDir}`,
        'pass --repos DIR with DIR/<owner>/<name> git repositories (for the fixtures: node --import tsx scripts/swe-fixtures.ts)',
      );
    }
  }

  async prepare(instance: SweInstance, _purpose: 'agent' | 'grade'): Promise<InstanceEnv> {
    // the environment first: a build that fails costs no checkout
    const cached = (await this.options.environments?.forInstance(instance)) ?? null;
    const root = await mkdtemp(join(this.options.tmpRoot ?? tmpdir(), 'polar-eval-'));
    const workdir = join(root, 'repo');
    const source = this.repoPath(instance.repo);
    const gitconfig = join(root, 'gitconfig');
    await writeFile(gitconfig, '');
    const script = [
      'set -e',
      'git clone -q --shared --no-checkout "$1" "$2"',
      'cd "$2"',
      'git checkout -q --detach "$3"',
      'git remote remove origin',
      'git for-each-ref --format="delete %(refname)" refs/heads | git update-ref --stdin',
      // tags of later commits go; tags of ancestors stay, as the official image keeps the tags older than
      // base_commit: setuptools-scm reads the version from them (pytest, astropy, matplotlib, xarray)
      'git for-each-ref --no-merged HEAD --format="delete %(refname)" refs/tags | git update-ref --stdin',
    ].join('\n');
    const result = await execTree('bash', ['-c', script, 'prepare', source, workdir, instance.base_commit], {
      env: gitEnv(gitconfig),
      timeoutMs: 120_000,
    });
    if (result.exitCode !== 0) {
      await rm(root, { recursive: true, force: true });
      throw new RuntimeError(
        `cannot check out ${instance.repo} at ${instance.base_commit}: ${result.output.trim().split('\n').pop() ?? ''}`,
      );
    }
    const env = new LocalEnv(
      root,
      workdir,
      this.options,
      cached ? environmentView(cached, layerDir(root)) : null,
    );
    if (cached) env.environment = sampleEnvironment(cached, env);
    return env;
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
    private readonly view: EnvironmentView | null,
  ) {
    this.scratch = root;
  }

  /** the view's PATH and variables; PYTHONPATH and PYTHONHOME of polar's own process are not passed on */
  private viewEnv(): Record<string, string | undefined> {
    if (!this.view) return {};
    return { ...this.hostCommand([]).env, PYTHONPATH: undefined, PYTHONHOME: undefined };
  }

  exec(script: string, options: EnvExecOptions = {}) {
    return execTree('bash', ['-c', script], {
      cwd: this.workdir,
      env: {
        ...gitEnv(join(this.root, 'gitconfig')),
        PYTHONDONTWRITEBYTECODE: '1',
        ...this.viewEnv(),
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

  /**
   * With a polar-built environment, the spec's eval_commands that only set the test run's environment
   * (Django's LANG / LC_ALL exports) run as in the official script; those that change this machine
   * (locale-gen) do not, and the install is the environment's per-sample step. Without one: nothing.
   */
  envSetup(setup: EnvSetup): string[] {
    return this.view ? setup.evalCommands.filter((c) => !isSystemStep(c)) : [];
  }

  hostCommand(argv: string[]): { command: string[]; cwd: string; env?: Record<string, string> } {
    if (!this.view) return { command: argv, cwd: this.workdir };
    const env = { ...this.view.env, PATH: [...this.view.path, process.env.PATH ?? ''].join(':') };
    return { command: argv, cwd: this.workdir, env };
  }

  reachHost(url: string): string {
    return url;
  }

  async dispose(): Promise<void> {
    if (!this.options.keep) await rm(this.root, { recursive: true, force: true });
  }
}
