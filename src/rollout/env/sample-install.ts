/**
 * A sample's install step (the layer, pre_install, install) as its SampleEnvironment runs it: as it is,
 * or, where the runtime keeps an install memo (install-memo.ts: the sandbox, whose samples share their
 * paths), traced once on the unpatched tree and replayed in a sample whose patch touches nothing it
 * read. layer.ts makes the steps; this runs them.
 */
import { execFile } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { shellQuote } from '../patch.ts';
import type { InstanceEnv } from '../runtime/types.ts';
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
import type { CachedEnv, InstallOutcome } from './types.ts';

/** One step: its name in the log, its script. */
export type InstallStep = [string, string];

export interface SampleInstallOptions {
  /** limit of each install step (ms) */
  timeoutMs: number;
  /** where the sample is, and its tree and scratch folder on this host: the memo's (absent: none) */
  memo?: { place: MemoPlace; host: { tree: string; scratch: string } };
}

/** memos read or being made in this process, by environment folder and key */
const memos = new Map<string, Promise<MemoState | null>>();

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

export class SampleInstall {
  private readonly memo: (SampleInstallOptions['memo'] & { key: string; id: string }) | null;
  /** time spent by prime() and what its install said, counted in the next install's */
  private primedMs = 0;
  private primedOutput = '';
  /** this tree holds the install of the unpatched tree (made by prime) */
  private installedAtBase = false;
  /** prime's install failed: the sample's own install runs as it is (and fails, or not, for itself) */
  private primeFailed = false;

  constructor(
    private readonly cached: CachedEnv,
    private readonly env: Pick<InstanceEnv, 'exec' | 'workdir' | 'scratch'>,
    private readonly layer: string,
    private readonly steps: () => InstallStep[],
    private readonly options: SampleInstallOptions,
  ) {
    const m = options.memo;
    const key = m ? memoKey(cached, m.place) : '';
    this.memo =
      m && cached.recipe.preInstall.length === 0 && traceableInstall(cached.recipe.install)
        ? { ...m, key, id: `${cached.dir}\0${key}` }
        : null;
  }

  /**
   * Where there is a memo to make and none yet: installs the tree (at base_commit, no agent code run
   * in it yet) traced, and keeps the memo. Its time and output count in the next install's.
   */
  async prime(): Promise<void> {
    const m = this.memo;
    if (!m || this.installedAtBase || memos.has(m.id) || (await this.known()) !== null) return;
    const outcome = await this.keep();
    this.primedMs += outcome.durationMs;
    // a failed install is made again (and reported) by the sample's own install
    if (outcome.ok) this.primedOutput += outcome.output;
    else this.primeFailed = true;
  }

  /** the install of the tree at base_commit with `patch` applied (none: the tree is at base_commit) */
  async install(request: { patch?: string } = {}): Promise<InstallOutcome> {
    const outcome = await this.installOnce(request.patch ?? '');
    const primed = { ms: this.primedMs, output: this.primedOutput };
    this.primedMs = 0;
    this.primedOutput = '';
    return { ...outcome, output: primed.output + outcome.output, durationMs: outcome.durationMs + primed.ms };
  }

  private async installOnce(patch: string): Promise<InstallOutcome> {
    const started = performance.now();
    if (!this.memo || this.primeFailed) return this.run(this.steps(), started);
    const state = await this.known();
    if (state === null && patch.trim() === '' && !this.installedAtBase) return this.keep();
    if (state === null || 'unmemoizable' in state)
      return this.run(
        this.steps(),
        started,
        state ? { note: `install not replayed: ${state.unmemoizable}` } : {},
      );
    const miss = memoMisses(state, patch);
    if (miss) return this.run(this.steps(), started, { note: `install not replayed: ${miss}` });
    const what = `>>>>> polar environment: install: ${this.cached.recipe.install} (replayed: the patch changes none of the ${state.files.length} files the install of the unpatched tree read or wrote, nor a folder it listed; memo ${state.key}, its log ${state.dir}/${MEMO_LOG})\n`;
    const done = (output: string): InstallOutcome => ({
      ok: true,
      step: null,
      output,
      durationMs: performance.now() - started,
    });
    // this tree was installed at base_commit by prime(): that install stands for the patched tree
    if (this.installedAtBase) return done(what);
    const restored = await this.env.exec(restoreScript(state.dir, this.layer, this.env.workdir), {
      timeoutMs: this.options.timeoutMs,
    });
    if (restored.exitCode === 0) return done(what + restored.output);
    const why = restored.output.trim().split('\n').pop() ?? '';
    return this.run(this.steps(), started, {
      note: `install not replayed: copying the memo failed (${why})`,
    });
  }

  private async run(
    steps: InstallStep[],
    started: number,
    extra: { env?: Record<string, string>; note?: string } = {},
  ): Promise<InstallOutcome> {
    const timeoutMs = this.options.timeoutMs;
    let output = extra.note ? `>>>>> polar environment: ${extra.note}\n` : '';
    for (const [step, script] of steps) {
      const r = await this.env.exec(script, { timeoutMs, ...(extra.env ? { env: extra.env } : {}) });
      output += `>>>>> polar environment: ${step}\n${r.output}`;
      if (r.exitCode !== 0) {
        const why = r.timedOut ? `timed out after ${Math.round(timeoutMs / 1000)}s` : `exit ${r.exitCode}`;
        return { ok: false, step: `${step} (${why})`, output, durationMs: performance.now() - started };
      }
    }
    return { ok: true, step: null, output, durationMs: performance.now() - started };
  }

  /** the memo on disk or in this process (null: none yet) */
  private async known(): Promise<MemoState | null> {
    const m = this.memo;
    if (!m) return null;
    const pending = memos.get(m.id);
    if (pending) return pending;
    const read = await readMemo(this.cached, m.key);
    if (read) memos.set(m.id, Promise.resolve(read));
    return read;
  }

  /** traces the install of the tree as it is (at base_commit) and keeps the memo, once in this process */
  private async keep(): Promise<InstallOutcome> {
    const m = this.memo!;
    const making = this.traced();
    memos.set(
      m.id,
      making.then((t) => t.state),
    );
    const { outcome, state } = await making;
    if (state === null) memos.delete(m.id);
    const kept =
      state === null ? '' : 'files' in state ? `memo ${state.key} kept` : `no memo: ${state.unmemoizable}`;
    return kept ? { ...outcome, output: `${outcome.output}>>>>> polar environment: ${kept}\n` } : outcome;
  }

  /** the install of the tree as it is, with the hook on; what it did judged and kept */
  private async traced(): Promise<{ outcome: InstallOutcome; state: MemoState | null }> {
    const started = performance.now();
    const m = this.memo!;
    const { env, layer, cached } = this;
    const log = `${env.scratch}/polar-install-trace.log`;
    const site = sitePackagesOf(cached, layer);
    const hook = [
      'set -e',
      `cat > ${shellQuote(`${site}/${TRACE_MODULE}.py`)} <<'POLAR_TRACE_EOF'`,
      TRACE_SOURCE,
      'POLAR_TRACE_EOF',
      `printf 'import ${TRACE_MODULE}\\n' > ${shellQuote(`${site}/${TRACE_PTH}`)}`,
      `rm -f ${shellQuote(log)}`,
    ].join('\n');
    const steps = this.steps();
    steps.splice(1, 0, ['trace', hook]);
    steps.push([
      'trace off',
      `rm -f ${shellQuote(`${site}/${TRACE_PTH}`)} ${shellQuote(`${site}/${TRACE_MODULE}.py`)}`,
    ]);
    const outcome = await this.run(steps, started, { env: { POLAR_INSTALL_TRACE: log } });
    if (!outcome.ok) return { outcome, state: null };
    this.installedAtBase = true;
    const hostLog = join(m.host.scratch, log.slice(env.scratch.length + 1));
    let verdict = judgeTrace(await readFile(hostLog, 'utf8').catch(() => ''), { tree: env.workdir, layer });
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
    await rm(hostLog, { force: true });
    return { outcome: { ...outcome, durationMs: performance.now() - started }, state };
  }
}
