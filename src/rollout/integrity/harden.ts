/**
 * The graded test run, hardened (docs/eval.md, "Grading integrity"). After the patch is applied and the
 * environment installed, in the grading environment (never the agent's):
 * 1. prepare (one script, before any test runs): the environment set-up of the official script, the test
 *    surface restored from base_commit (surface.ts), the test patch, polar's reporter and the canaries
 *    (canary.ts) put in place. Its exit status is polar's own: exit 97/98 cannot come from the code
 *    under test;
 * 2. the test run alone, in a locked-down environment: no user site, no PYTHONPATH but polar's reporter,
 *    no PYTHONSTARTUP / LD_PRELOAD / NODE_OPTIONS / PYTEST_ADDOPTS, a PATH without relative entries or
 *    entries in the tree, `.pyc` files only from a fresh cache folder (a planted __pycache__ is never
 *    read), pytest's plugin autoload off with the plugins of polar's built environment named with `-p`,
 *    `--confcutdir` at the tree's root; the runner's structured report to a path drawn at random; the
 *    exit status of this command is the runner's own;
 * 3. the report read back in a command of its own, after the runner has exited.
 * The result is judged by verdict.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SweInstance } from '../dataset.ts';
import type { ExecResult } from '../exec.ts';
import { shellQuote } from '../patch.ts';
import type { InstanceEnv } from '../runtime/types.ts';
import { type TestSpec, testDirectives } from '../specs.ts';
import {
  type Canary,
  type CanaryPlan,
  cryptoRandom,
  nodeCanaries,
  pythonCanaries,
  type Random,
} from './canary.ts';
import { parseDiff } from './diff.ts';
import { NODE_REPORTER, PYTEST_PLUGIN } from './reports.ts';
import { HARDENED_GIT, restoreScript, surfacePaths } from './surface.ts';

export type RunnerKind = 'pytest' | 'node-test' | 'sympy' | 'other';

/** Which runner a test command starts (tox, nox and wrappers are `other`: no report, no canaries). */
export function runnerKind(testCmd: string, parser: string): RunnerKind {
  if (/(^|[\s;&|(/])(tox|nox)(\s|$)/.test(testCmd)) return 'other';
  if (/(^|[\s/])(pytest|py\.test)(\s|$)|(^|\s)-m\s+pytest(\s|$)/.test(testCmd)) return 'pytest';
  if (/(^|[\s/])node\s+(\S+\s+)*--test(\s|$)/.test(testCmd)) return 'node-test';
  if (/(^|[\s/])bin\/test(\s|$)/.test(testCmd) && parser === 'sympy') return 'sympy';
  return 'other';
}

/** node's reporter flags: the command's own reporter to stdout, polar's to the report file */
function nodeReporterFlags(testCmd: string, reporter: string, report: string): string[] | null {
  const reporters = testCmd.match(/--test-reporter(=|\s)/g)?.length ?? 0;
  if (/--test-reporter-destination/.test(testCmd) || reporters > 1) return null;
  return [
    ...(reporters === 0 ? ['--test-reporter=tap'] : []),
    '--test-reporter-destination=stdout',
    `--test-reporter=${reporter}`,
    `--test-reporter-destination=${report}`,
  ];
}

const pluginCache = new Map<string, string[]>();

/**
 * The pytest plugins an environment polar built declares (`pytest11` entry points of its
 * distributions), as `-p` names them now that autoload is off: the entry point's name where the
 * environment's pytest loads one by name (4.4 and later: registered under the name autoload would give
 * it), else its module. Read on this host from the cached environment, which the sample cannot change
 * (a sandbox binds it read-only); the sample's own install is not read.
 */
export function environmentPlugins(sitePackages: string | undefined): string[] {
  if (!sitePackages) return [];
  const known = pluginCache.get(sitePackages);
  if (known) return known;
  let entries: string[] = [];
  try {
    entries = readdirSync(sitePackages).filter((e) => e.endsWith('.dist-info') || e.endsWith('.egg-info'));
  } catch {}
  const pytest = entries.map((e) => /^pytest-(\d+)\.(\d+)/i.exec(e)).find((m) => m !== null);
  const byName = pytest ? Number(pytest[1]) > 4 || (Number(pytest[1]) === 4 && Number(pytest[2]) >= 4) : true;
  const plugins: string[] = [];
  for (const entry of entries.sort()) {
    let text: string;
    try {
      text = readFileSync(join(sitePackages, entry, 'entry_points.txt'), 'utf8');
    } catch {
      continue;
    }
    let inGroup = false;
    for (const line of text.split('\n')) {
      const section = /^\s*\[(.+)\]\s*$/.exec(line);
      if (section) inGroup = section[1]!.trim() === 'pytest11';
      else if (inGroup) {
        const m = /^\s*([^=#\s][^=]*?)\s*=\s*([\w.]+)/.exec(line);
        const name = m ? (byName ? m[1]! : m[2]!) : null;
        if (name && !plugins.includes(name)) plugins.push(name);
      }
    }
  }
  pluginCache.set(sitePackages, plugins);
  return plugins;
}

export interface HardenedRun {
  /** how the run is read: a report (pytest, node-test), or the test output (sympy and the others) */
  runner: 'pytest' | 'node-test' | 'stdout';
  canaries: Canary[];
  /** where the report is written (null: a runner without one) */
  reportPath: string | null;
  /** the prepare script (set-up, restore, test patch, reporter, canaries) */
  prepare: string;
  /** the test run (lockdown, markers, the runner) */
  test: string;
}

const heredoc = (path: string, content: string, tag: string, append = false) => [
  `mkdir -p "$(dirname ${shellQuote(path)})"`,
  `cat ${append ? '>>' : '>'} ${shellQuote(path)} <<'${tag}'`,
  content.endsWith('\n') ? content.slice(0, -1) : content,
  tag,
];

/** the canaries of a run: none without a test file to put them beside (the whole suite would change) */
function canariesFor(
  runner: RunnerKind,
  directives: string[],
  testPatch: string,
  random: Random,
): CanaryPlan | null {
  if (runner === 'pytest' || runner === 'sympy') {
    const beside = directives.find((d) => d.endsWith('.py'));
    return beside ? pythonCanaries(beside, runner, random) : null;
  }
  if (runner === 'node-test') {
    const deleted = new Set(parseDiff(testPatch).flatMap((f) => (f.deleted && f.a ? [f.a] : [])));
    const target = directives.find((d) => /\.[cm]?js$/.test(d) && !deleted.has(d));
    return target ? nodeCanaries(target, random) : null;
  }
  return null;
}

/** The scripts of one hardened test run. */
export function hardenedRun(
  env: Pick<InstanceEnv, 'scratch' | 'workdir'>,
  instance: SweInstance,
  spec: Pick<TestSpec, 'testCmd' | 'parser' | 'directives'>,
  options: {
    agentPatch: string;
    testPatchFile: string;
    setup: string[];
    /** pytest plugins the environment needs (environmentPlugins) */
    plugins?: string[];
    random?: Random;
  },
): HardenedRun {
  const random = options.random ?? cryptoRandom;
  const tag = `POLAR_${random.hex(8).toUpperCase()}`;
  const dir = `${env.scratch}/polar-${random.hex(8)}`;
  const runner = runnerKind(spec.testCmd, spec.parser);
  const directives = testDirectives(instance.test_patch, spec.directives);
  const canary = directives.length > 0 ? canariesFor(runner, directives, instance.test_patch, random) : null;
  const prepare = [
    'set -uo pipefail',
    ...options.setup,
    ...restoreScript(instance.base_commit, surfacePaths(options.agentPatch, instance.test_patch)),
    `${HARDENED_GIT} apply --verbose ${shellQuote(options.testPatchFile)} || { echo ">>>>> test_patch failed to apply"; exit 97; }`,
  ];
  let reportPath: string | null = null;
  const runnerArgs: string[] = [];
  const lock: string[] = [
    'unset PYTHONSTARTUP PYTHONINSPECT PYTHONUSERBASE PYTHONWARNINGS PYTEST_ADDOPTS PYTEST_PLUGINS LD_PRELOAD LD_AUDIT NODE_OPTIONS NODE_PATH',
    `export PYTHONNOUSERSITE=1 PYTHONBREAKPOINT=0 PYTHONDONTWRITEBYTECODE=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTHONPYCACHEPREFIX=${shellQuote(`${dir}/pycache`)}`,
    // absolute PATH entries outside the tree, in their order
    `polar_path=; IFS=: read -ra polar_parts <<< "$PATH"; for d in "\${polar_parts[@]}"; do case "$d" in /*) case "$d/" in "$PWD"/*) ;; *) polar_path="\${polar_path:+$polar_path:}$d" ;; esac ;; esac; done; export PATH="$polar_path"`,
  ];
  if (runner === 'pytest') {
    const module = `p_${random.hex(6)}`;
    reportPath = `${dir}/${random.hex(8)}.json`;
    prepare.push(...heredoc(`${dir}/${module}.py`, PYTEST_PLUGIN, tag));
    lock.push(`export PYTHONPATH=${shellQuote(dir)} POLAR_TEST_REPORT=${shellQuote(reportPath)}`);
    runnerArgs.push('-p', module, ...(options.plugins ?? []).flatMap((p) => ['-p', p]));
    runnerArgs.push(`--confcutdir=${env.workdir}`);
  } else {
    lock.push('unset PYTHONPATH');
    if (runner === 'node-test') {
      const reporter = `${dir}/r-${random.hex(6)}.mjs`;
      const path = `${dir}/${random.hex(8)}.json`;
      const flags = nodeReporterFlags(spec.testCmd, reporter, path);
      if (flags) {
        reportPath = path;
        prepare.push(...heredoc(reporter, NODE_REPORTER, tag));
        runnerArgs.push(...flags);
      }
    }
  }
  if (canary) {
    prepare.push(...heredoc(canary.file, canary.content, tag, canary.mode === 'append'));
  }
  // the canary file first: a run that stops part-way has run it
  const args = [...runnerArgs, ...(canary?.directive ? [canary.directive] : []), ...directives];
  const test = [
    'set -uo pipefail',
    ...lock,
    "echo '>>>>> Start Test Output'",
    `${spec.testCmd} ${args.map(shellQuote).join(' ')}`,
    'polar_code=$?',
    "echo '>>>>> End Test Output'",
    'exit $polar_code',
  ].join('\n');
  return {
    runner: reportPath !== null && (runner === 'pytest' || runner === 'node-test') ? runner : 'stdout',
    canaries: canary?.canaries ?? [],
    reportPath,
    prepare: prepare.join('\n'),
    test,
  };
}

/** The report's text, read after the runner exited (null: none was written). */
export async function readReport(
  env: Pick<InstanceEnv, 'exec'>,
  path: string | null,
): Promise<string | null> {
  if (path === null) return null;
  const r: ExecResult = await env.exec(`cat ${shellQuote(path)}`, { timeoutMs: 60_000 });
  return r.exitCode === 0 ? r.stdout : null;
}
