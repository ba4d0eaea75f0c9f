/**
 * What the cluster end-to-end files (test/e2e/cluster-*.test.ts) share: the hooks of a describe that
 * needs test hosts (fixture repositories, a TestNet, a temporary folder and the cluster started on them,
 * all torn down in `after` whatever the tests did), a command run on the cluster's terms under a time
 * limit, and the gold-agent run on fixture rows that each compares with one machine's.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { ensureFixtureRepos } from '../../../scripts/swe-fixtures.ts';
import { localEval, MINI, runnableIds } from '../../unit/rollout/run/helpers.ts';
import { ROOT } from '../cli.ts';
import { tempDir } from '../temp.ts';
import { TestNet } from './netns.ts';

/** `node bin/polar eval` */
export const POLAR_EVAL = [process.execPath, join(ROOT, 'bin/polar'), 'eval'];

/**
 * The hooks of a describe that needs a cluster: fixture repositories, `nodes` test hosts, a temporary
 * folder (`prefix`), then `start` (the cluster, in tmp/`key`); torn down (processes by pid, namespaces,
 * folder) in `after`. The returned object (`net`, `tmp`, and the cluster under `key`) is filled in by
 * `before`.
 */
export function useTestCluster<K extends string, C>(
  prefix: string,
  key: K,
  start: (net: TestNet, dir: string) => Promise<C>,
  nodes = 3,
): { net: TestNet; tmp: string } & Record<K, C> {
  const state = {} as { net: TestNet; tmp: string } & Record<K, C>;
  before(async () => {
    ensureFixtureRepos();
    state.tmp = tempDir(prefix);
    state.net = TestNet.create(nodes);
    (state as Record<K, C>)[key] = await start(state.net, join(state.tmp, key));
  });
  after(async () => {
    await state.net?.destroy();
    if (state.tmp) rmSync(state.tmp, { recursive: true, force: true });
  });
  return state;
}

/**
 * Runs argv from the repository root with `env`, its child noted in `net` (killed on teardown);
 * resolves with the exit code, stdout and stderr, each stderr line passed to `onLine`; killed after `limitMs`.
 */
export function runOnCluster(
  net: TestNet,
  argv: string[],
  env: NodeJS.ProcessEnv,
  limitMs: number,
  onLine?: (line: string) => void,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    net.children.push(child);
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d;
      for (const line of String(d).split('\n')) if (line) onLine?.(line);
    });
    child.stdout.on('data', (d: Buffer) => {
      stdout += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The first two fixture rows the gold agent can run here (pytest may be missing). */
export const goldIds = (): string[] => runnableIds().slice(0, 2);

/** `polar eval` flags of the gold agent on `ids`, `samples` each, on the local runtime of each node. */
export function goldEvalArgs(ids: string[], samples: number): string[] {
  return [
    '--dataset',
    MINI,
    '--agent',
    'gold',
    '--runtime',
    'local',
    '--instances',
    ids.join(','),
    '--samples',
    String(samples),
    '--cluster-memory',
    '256MiB',
  ];
}

/** The same samples on one machine (`polar eval` without --cluster) in `out`, which it returns. */
export function localGoldRun(out: string, ids: string[], samples: number): string {
  const r = localEval('gold', out, ['--instances', ids.join(','), '--samples', String(samples)]);
  assert.equal(r.code, 0, r.stderr);
  return out;
}
