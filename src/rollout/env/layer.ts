/**
 * One sample's layer over a cached environment, so its tests import the sample's own code. The layer is
 * a venv of the environment's interpreter (`--without-pip`, so it costs no install) whose site-packages
 * holds `~polar-env.pth`: `site.addsitedir(<cached site-packages>)`, which puts the cached packages on
 * sys.path after the layer's own (the name sorts after every other .pth, so an editable install's path
 * comes first) and runs their .pth files too (the guard's hook). The environment's console scripts are
 * copied into the layer's bin/ pointing at the layer's python, so `pytest` or `pip` run in the layer.
 * The repository's install step then runs against the sample's tree with the layer first on PATH:
 * `pip install -e .` puts the tree itself on the layer's path, and pip leaves the cached copy of a
 * package alone ("outside environment"), so nothing a sample does changes the cache (a sandbox binds
 * it read-only). Why not a copy of the environment per sample: it costs a copy per sample, and a copy
 * shares nothing a later build could fix; `--system-site-packages` only sees the interpreter's own
 * site-packages, not the environment's.
 */
import { shellQuote } from '../patch.ts';
import type { InstanceEnv } from '../runtime/types.ts';
import { pipEnv, pipFailure } from './build.ts';
import { guardReport, judgeGuard, testProgram } from './guard.ts';
import { type InstallStep, SampleInstall, type SampleInstallOptions } from './sample-install.ts';
import { type CachedEnv, EnvBuildError, type EnvironmentView, type SampleEnvironment } from './types.ts';
import { wheelhouseOf, wheelhouseRequirements } from './wheelhouse.ts';

/** The layer's folder inside a sample's scratch folder. */
export const layerDir = (scratch: string) => `${scratch}/polar-env`;

/**
 * What every command of a sample whose layer is at `layer` gets. pip is offline and finds only the
 * environment's wheelhouse (wheelhouse.ts: the build requirements of the sample's tree), in the sandbox
 * (no network) and on this machine alike: the install step needs nothing the environment does not hold,
 * and one that does fails at once, naming it.
 */
export function environmentView(cached: CachedEnv, layer: string): EnvironmentView {
  return {
    path: [`${layer}/bin`, `${cached.dir}/bin`],
    env: {
      VIRTUAL_ENV: layer,
      ...pipEnv(),
      PIP_NO_INDEX: '1',
      PIP_FIND_LINKS: wheelhouseOf(cached.dir),
    },
    mounts: [cached.dir, cached.python.prefix],
  };
}

/**
 * What a sample's install may name when it fails: the requirements polar asked for (the environment's
 * own, and the build requirements in its wheelhouse). pip's words name nothing else (build.ts
 * pipFailure: a line of a file pip read is not repeated).
 */
export function installRequested(cached: CachedEnv): string[] {
  return [...cached.recipe.requirements, ...cached.recipe.pipPackages, ...wheelhouseRequirements(cached.dir)];
}

/**
 * Why an install step failed, in pip's own words when pip says (the requirement it could not find when
 * polar asked for it: `requested`, and whether it was a build requirement, which the environment's
 * wheelhouse should hold), or null.
 */
export function installCause(output: string, requested: readonly string[] = []): string | null {
  const pipSaid = /No matching distribution found|ERROR: |error: /.test(output);
  if (!pipSaid) return null;
  const cause = pipFailure(output, requested);
  if (/Installing build dependencies[^\n]*: finished with status 'error'/.test(output))
    return `a build requirement is missing: ${cause} (pip is offline in a sample; the environment's wheelhouse holds the build requirements polar read from the tree)`;
  return cause;
}

/** Makes the layer (Python 3.5+): the venv, the .pth onto the cached site-packages, the scripts. */
const MAKE_LAYER = `import os, sys, venv
layer, site_dir, cached = sys.argv[1:4]
venv.EnvBuilder(symlinks=True, with_pip=False, clear=True).create(layer)
purelib = os.path.join(layer, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
with open(os.path.join(purelib, "~polar-env.pth"), "w") as f:
    f.write("import site; site.addsitedir(%r)\\n" % site_dir)
old = os.path.join(cached, "bin", "python").encode()
new = os.path.join(layer, "bin", "python").encode()
for name in sorted(os.listdir(os.path.join(cached, "bin"))):
    src = os.path.join(cached, "bin", name)
    dst = os.path.join(layer, "bin", name)
    if os.path.islink(src) or not os.path.isfile(src) or os.path.exists(dst) or name.lower().startswith("activate"):
        continue
    with open(src, "rb") as f:
        data = f.read()
    if old not in data[:512]:
        continue
    with open(dst, "wb") as f:
        f.write(data[:512].replace(old, new) + data[512:])
    os.chmod(dst, os.stat(src).st_mode & 0o777)
`;

export function makeLayerScript(cached: CachedEnv, layer: string): string {
  return [
    'set -e',
    `${shellQuote(cached.python.executable)} - ${[layer, cached.sitePackages, cached.dir].map(shellQuote).join(' ')} <<'POLAR_LAYER_EOF'`,
    MAKE_LAYER,
    'POLAR_LAYER_EOF',
  ].join('\n');
}

/** pre_install as the official image runs it (one `set -euxo pipefail` script), /testbed being the tree. */
export function preInstallScript(steps: string[], tree: string): string {
  return ['set -euxo pipefail', ...steps.map((s) => s.replaceAll('/testbed', tree))].join('\n');
}

export interface SampleEnvironmentOptions {
  /** limit of each install step (ms) */
  timeoutMs?: number;
  /**
   * the install memo (install-memo.ts), where the runtime gives every sample the same paths (the
   * sandbox): where the sample is and where its tree and scratch folder are on this host
   */
  memo?: SampleInstallOptions['memo'];
}

/** the layer, pre_install and install as the steps of one script each */
function installSteps(cached: CachedEnv, layer: string, workdir: string): InstallStep[] {
  const steps: InstallStep[] = [['layer', makeLayerScript(cached, layer)]];
  const { preInstall, install } = cached.recipe;
  if (preInstall.length > 0) steps.push(['pre_install', preInstallScript(preInstall, workdir)]);
  if (install) steps.push([`install: ${install}`, `set -x\n${install}`]);
  return steps;
}

/** The per-sample part of `cached` on a prepared environment (whose exec already has the view). */
export function sampleEnvironment(
  cached: CachedEnv,
  env: Pick<InstanceEnv, 'exec' | 'workdir' | 'scratch'>,
  options: SampleEnvironmentOptions = {},
): SampleEnvironment {
  const layer = layerDir(env.scratch);
  const guardLog = `${env.scratch}/polar-guard.log`;
  const timeoutMs = options.timeoutMs ?? 30 * 60_000;
  const installer = new SampleInstall(cached, env, layer, () => installSteps(cached, layer, env.workdir), {
    timeoutMs,
    ...(options.memo ? { memo: options.memo } : {}),
  });
  return {
    cached,
    layer,
    prime: () => installer.prime(),
    install: (request) => installer.install(request),
    guardEnv: () => ({ POLAR_GUARD_LOG: guardLog, POLAR_GUARD_TREE: env.workdir }),
    async checkGuard({ passed, testCmd }) {
      const places = {
        log: guardLog,
        tree: env.workdir,
        layer,
        program: testCmd === null ? null : testProgram(testCmd),
      };
      const r = await env.exec(guardReport(places), { timeoutMs: 60_000 });
      return judgeGuard(r.output, { ...places, envDir: cached.dir, passed, install: cached.recipe.install });
    },
  };
}

/**
 * The agent's environment: the install at base_commit, then what pre_install and install changed in the
 * tree committed (as the official image commits its set-up), so the agent's patch, taken against that
 * commit, holds only the agent's changes. Returns the commit to take the patch against; an install that
 * fails on the unpatched tree is an infrastructure failure (EnvBuildError).
 */
export async function setUpForAgent(env: InstanceEnv): Promise<string | undefined> {
  const environment = env.environment;
  if (!environment) return undefined;
  const installed = await environment.install();
  if (!installed.ok) {
    const cause = installCause(installed.output, installRequested(environment.cached));
    throw new EnvBuildError(
      `environment ${environment.cached.name}: the install step fails on the unpatched tree (${installed.step})${cause ? `: ${cause}` : ''}`,
      installed.output,
    );
  }
  const commit = await env.exec(
    [
      'set -e',
      `if [ -n "$(git status --porcelain)" ]; then git add -A && git -c user.name=polar -c user.email=polar@localhost commit -q --no-verify -m 'polar: environment set-up'; fi`,
      'git rev-parse HEAD',
    ].join('\n'),
    { timeoutMs: 120_000 },
  );
  if (commit.exitCode !== 0)
    throw new EnvBuildError(`cannot commit the environment set-up: ${commit.output.trim()}`, commit.output);
  return commit.output.trim().split('\n').at(-1);
}
