import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { readFileSync } from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { ensureFixtureRepos, ensureFixtureWheels } from '../../../../scripts/swe-fixtures.ts';
import type { Agent } from '../../../../src/rollout/agents.ts';
import type { SweInstance } from '../../../../src/rollout/dataset.ts';
import type { EvalOptions } from '../../../../src/rollout/run/run.ts';
import { LocalRuntime } from '../../../../src/rollout/runtime/local.ts';
import { ROOT, runPolarSync } from '../../../support/cli.ts';

export { ROOT };
export const MINI = join(ROOT, 'fixtures/swe/mini.jsonl');
export const REPOS = join(ROOT, 'fixtures/swe/repos');
/** rows whose environment polar builds (fixtures/swe/env-tasks) */
export const ENVS = join(ROOT, 'fixtures/swe/envs.jsonl');
export const WHEELS = join(ROOT, 'fixtures/swe/wheels');

/**
 * pip offline and on its own: no user or site config (no mirror), no index, the fixture wheels (and
 * `more` folders) as the only links; what a user's pip config would point at, made hermetic
 */
export function offlinePip(...more: string[]): Record<string, string> {
  return { PIP_CONFIG_FILE: '/dev/null', PIP_NO_INDEX: '1', PIP_FIND_LINKS: [WHEELS, ...more].join(' ') };
}

let wheelsBuilt = false;
/** the fixture repositories and the wheels of their base versions */
export function envFixtures(): void {
  fixtures();
  if (!wheelsBuilt) ensureFixtureWheels();
  wheelsBuilt = true;
}

let built = false;
export function fixtures(): void {
  if (!built) ensureFixtureRepos();
  built = true;
}

let pytest: boolean | undefined;
/** Whether python3 has pytest (asked once, when first needed: importing this file starts no Python). */
export function hasPytest(): boolean {
  pytest ??= spawnSync('python3', ['-m', 'pytest', '--version'], { stdio: 'ignore' }).status === 0;
  return pytest;
}
/** A test's skip option when pytest is missing. */
export function pytestSkip(): string | false {
  return hasPytest() ? false : 'python3 -m pytest is not available (apt-get install -y python3-pytest)';
}

export function miniRows(): Array<Record<string, unknown>> {
  return readFileSync(MINI, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/** Instance ids to run: all 8 when pytest is there, else the JS ones. */
export function runnableIds(): string[] {
  return miniRows()
    .filter((r) => hasPytest() || String(r.test_cmd).startsWith('node'))
    .map((r) => String(r.instance_id));
}

/** `polar ARGS`, run to the end (test/support/cli.ts), with `env` added to the environment. */
export const polar = (args: string[], env: Record<string, string> = {}) => runPolarSync(args, { env });

/** `polar eval` of the mini dataset with an agent (gold, empty, predictions) on the local runtime. */
export function localEval(agent: string, out: string, extra: string[] = []): ReturnType<typeof polar> {
  return polar(['eval', '--dataset', MINI, '--agent', agent, '--runtime', 'local', '--out', out, ...extra]);
}

/** runEval's options for a test: one sample of each instance on the local runtime, one at a time. */
export function localEvalOptions(
  instances: SweInstance[],
  agent: Agent,
  out: string,
  extra: Partial<EvalOptions> = {},
): EvalOptions {
  return {
    instances,
    agent,
    runtime: new LocalRuntime({ reposDir: REPOS }),
    out,
    samples: 1,
    concurrency: 1,
    agentTimeoutMs: 60_000,
    testTimeoutMs: 60_000,
    resume: false,
    dataset: 'mini',
    progress: false,
    ...extra,
  };
}

export function gitHead(dir: string): string {
  return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: dir, encoding: 'utf8' }).trim();
}

/** A patch made with git: clone the fixture repo, edit files, diff. */
export function makePatch(repo: string, edits: Record<string, (old: string) => string>): string {
  const { mkdtempSync, writeFileSync: write, rmSync } = fs;
  const dir = mkdtempSync(join(os.tmpdir(), 'polar-mkpatch-'));
  try {
    execFileSync('git', ['clone', '-q', join(REPOS, repo), dir]);
    for (const [file, edit] of Object.entries(edits))
      write(join(dir, file), edit(readFileSync(join(dir, file), 'utf8')));
    return execFileSync('git', ['diff', '--no-color'], { cwd: dir, encoding: 'utf8' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
