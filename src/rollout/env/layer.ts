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
import { execFile } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { shellQuote } from '../patch.ts';
import type { InstanceEnv } from '../runtime/types.ts';
import { pipEnv, pipFailure } from './build.ts';
import { guardReport, judgeGuard, testProgram } from './guard.ts';
import {
  judgeTrace,
  MEMO_LOG,
  type MemoPlace,
  type MemoState,
  memoKey,
  memoMisses,
  readMemo,
  saveMemo,
  sitePackagesOf,
  TRACE_MODULE,
  TRACE_PTH,
  TRACE_SOURCE,
  traceableInstall,
} from './install-memo.ts';
import {
  type CachedEnv,
  EnvBuildError,
  type EnvironmentView,
  type InstallOutcome,
  type SampleEnvironment,
} from './types.ts';
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
  memo?: { place: MemoPlace; host: { tree: string; scratch: string } };
}

/** memos read or being made in this process, by environment folder and key */
const memos = new Map<string, Promise<MemoState | null>>();

/** pre_install and install as the steps of one script each */
function installSteps(cached: CachedEnv, layer: string, workdir: string): Array<[string, string]> {
  const steps: Array<[string, string]> = [['layer', makeLayerScript(cached, layer)]];
  const { preInstall, install } = cached.recipe;
  if (preInstall.length > 0) steps.push(['pre_install', preInstallScript(preInstall, workdir)]);
  if (install) steps.push([`install: ${install}`, `set -x\n${install}`]);
  return steps;
}

/** copies a memo's layer and tree files in (inside the environment, as the sample's user) */
function restoreScript(memoDir: string, layer: string, tree: string): string {
  const cp = 'cp -R --no-dereference --preserve=mode,timestamps --';
  return [
    'set -e',
    `rm -rf -- ${shellQuote(layer)}`,
    `${cp} ${shellQuote(`${memoDir}/layer`)} ${shellQuote(layer)}`,
    `if [ -d ${shellQuote(`${memoDir}/tree`)} ]; then ${cp} ${shellQuote(`${memoDir}/tree/.`)} ${shellQuote(`${tree}/`)}; fi`,
  ].join('\n');
}

/** which of `paths` (relative) the tree's git tracks at its HEAD (read on this host) */
async function trackedPaths(tree: string, paths: string[]): Promise<string[]> {
  try {
    const { stdout } = await promisify(execFile)(
      'git',
      ['-c', 'safe.directory=*', '-C', tree, 'ls-files', '-z', '--', ...paths.map((p) => `:(literal)${p}`)],
      { maxBuffer: 64 << 20 },
    );
    return stdout.split('\0').filter(Boolean);
  } catch {
    return paths; // unknown: taken as tracked (no memo)
  }
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
  const memo =
    options.memo && cached.recipe.preInstall.length === 0 && traceableInstall(cached.recipe.install)
      ? { ...options.memo, key: memoKey(cached, options.memo.place) }
      : null;
  const memoId = memo ? `${cached.dir}\0${memo.key}` : '';
  /** time spent by prime() and what its install said, counted in the next install's */
  let primedMs = 0;
  let primedOutput = '';
  /** this tree holds the install of the unpatched tree (made by prime) */
  let installedAtBase = false;
  /** prime's install failed: the sample's own install runs as it is (and fails, or not, for itself) */
  let primeFailed = false;

  const run = async (
    steps: Array<[string, string]>,
    started: number,
    extra: { env?: Record<string, string>; note?: string } = {},
  ): Promise<InstallOutcome> => {
    let output = extra.note ? `>>>>> polar environment: ${extra.note}\n` : '';
    for (const [step, script] of steps) {
      const r = await env.exec(script, { timeoutMs, ...(extra.env ? { env: extra.env } : {}) });
      output += `>>>>> polar environment: ${step}\n${r.output}`;
      if (r.exitCode !== 0) {
        const why = r.timedOut ? `timed out after ${Math.round(timeoutMs / 1000)}s` : `exit ${r.exitCode}`;
        return { ok: false, step: `${step} (${why})`, output, durationMs: performance.now() - started };
      }
    }
    return { ok: true, step: null, output, durationMs: performance.now() - started };
  };

  /** the memo on disk or in this process (null: none yet) */
  const known = async (): Promise<MemoState | null> => {
    if (!memo) return null;
    const pending = memos.get(memoId);
    if (pending) return pending;
    const read = await readMemo(cached, memo.key);
    if (read) memos.set(memoId, Promise.resolve(read));
    return read;
  };

  /** the install of the tree as it is (the unpatched tree), traced and kept as the memo */
  const traced = async (): Promise<{ outcome: InstallOutcome; state: MemoState | null }> => {
    const started = performance.now();
    const m = memo!;
    const log = `${env.scratch}/polar-install-trace.log`;
    const site = sitePackagesOf(cached, layer);
    const steps = installSteps(cached, layer, env.workdir);
    const hook = [
      'set -e',
      `cat > ${shellQuote(`${site}/${TRACE_MODULE}.py`)} <<'POLAR_TRACE_EOF'`,
      TRACE_SOURCE,
      'POLAR_TRACE_EOF',
      `printf 'import ${TRACE_MODULE}\\n' > ${shellQuote(`${site}/${TRACE_PTH}`)}`,
      `rm -f ${shellQuote(log)}`,
    ].join('\n');
    steps.splice(1, 0, ['trace', hook]);
    steps.push([
      'trace off',
      `rm -f ${shellQuote(`${site}/${TRACE_PTH}`)} ${shellQuote(`${site}/${TRACE_MODULE}.py`)}`,
    ]);
    const outcome = await run(steps, started, { env: { POLAR_INSTALL_TRACE: log } });
    if (!outcome.ok) return { outcome, state: null };
    installedAtBase = true;
    let verdict = judgeTrace(
      await readFile(join(m.host.scratch, 'polar-install-trace.log'), 'utf8').catch(() => ''),
      { tree: env.workdir, layer },
    );
    if (verdict.ok && verdict.deleted.length > 0) {
      const tracked = await trackedPaths(m.host.tree, verdict.deleted);
      if (tracked.length > 0) verdict = { ok: false, why: `it removes ${tracked[0]} from the tree` };
    }
    const hostLayer = join(m.host.scratch, layer.slice(env.scratch.length + 1));
    const state = await saveMemo(
      cached,
      m.key,
      verdict,
      { layer: hostLayer, tree: m.host.tree },
      outcome.output,
    );
    await rm(join(m.host.scratch, 'polar-install-trace.log'), { force: true });
    return { outcome: { ...outcome, durationMs: performance.now() - started }, state };
  };

  /** traces the install of the tree as it is (at base_commit) and keeps the memo, once in this process */
  const keep = async (): Promise<InstallOutcome> => {
    const making = traced();
    memos.set(
      memoId,
      making.then((t) => t.state),
    );
    const { outcome, state } = await making;
    if (state === null) memos.delete(memoId);
    const kept =
      state === null ? '' : 'files' in state ? `memo ${state.key} kept` : `no memo: ${state.unmemoizable}`;
    return kept ? { ...outcome, output: `${outcome.output}>>>>> polar environment: ${kept}\n` } : outcome;
  };

  /** the install of a tree at base_commit with `patch` applied: run, or replayed from the memo */
  const installOnce = async (patch: string): Promise<InstallOutcome> => {
    const started = performance.now();
    const steps = installSteps(cached, layer, env.workdir);
    if (!memo || primeFailed) return run(steps, started);
    const state = await known();
    if (state === null && patch.trim() === '' && !installedAtBase) return keep();
    if (state === null || 'unmemoizable' in state)
      return run(steps, started, state ? { note: `install not replayed: ${state.unmemoizable}` } : {});
    const miss = memoMisses(state, patch);
    if (miss) return run(steps, started, { note: `install not replayed: ${miss}` });
    const what = `>>>>> polar environment: install: ${cached.recipe.install} (replayed: the patch changes none of the ${state.files.length} files the install of the unpatched tree read or wrote, nor a folder it listed; memo ${state.key}, its log ${state.dir}/${MEMO_LOG})\n`;
    const done = (output: string): InstallOutcome => ({
      ok: true,
      step: null,
      output,
      durationMs: performance.now() - started,
    });
    // this tree was installed at base_commit by prime(): that install stands for the patched tree
    if (installedAtBase) return done(what);
    const restored = await env.exec(restoreScript(state.dir, layer, env.workdir), { timeoutMs });
    if (restored.exitCode === 0) return done(what + restored.output);
    const why = restored.output.trim().split('\n').pop() ?? '';
    return run(steps, started, { note: `install not replayed: copying the memo failed (${why})` });
  };

  return {
    cached,
    layer,
    async prime(): Promise<void> {
      if (!memo || installedAtBase || memos.has(memoId) || (await known()) !== null) return;
      const outcome = await keep();
      primedMs += outcome.durationMs;
      // a failed install is made again (and reported) by the sample's own install
      if (outcome.ok) primedOutput += outcome.output;
      else primeFailed = true;
    },
    async install(request: { patch?: string } = {}): Promise<InstallOutcome> {
      const outcome = await installOnce(request.patch ?? '');
      const primed = { ms: primedMs, output: primedOutput };
      primedMs = 0;
      primedOutput = '';
      return {
        ...outcome,
        output: primed.output + outcome.output,
        durationMs: outcome.durationMs + primed.ms,
      };
    },
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
