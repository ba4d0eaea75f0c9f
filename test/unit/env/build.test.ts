import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Environments } from '../../../src/rollout/env/build.ts';
import { withLock } from '../../../src/rollout/env/lock.ts';
import { EnvBuildError, type EnvRecipe } from '../../../src/rollout/env/types.ts';
import { log } from '../../../src/util/log.ts';
import { tempDir } from '../../support/temp.ts';

const recipe = (over: Partial<EnvRecipe> = {}): EnvRecipe => ({
  repo: 'x/y',
  version: '1.0',
  source: 'row',
  python: null,
  requirements: [],
  pipPackages: [],
  preInstall: [],
  systemSteps: [],
  install: null,
  requirementsFrom: null,
  skipped: [],
  ...over,
});

/** an interpreter that passes the probe and fails `-m venv` */
function failingPython(dir: string): string {
  const python = join(dir, 'python3.99');
  writeFileSync(
    python,
    `#!/bin/sh\nif [ "$1" = "-c" ]; then printf '3.99.0\\n/opt/py\\n%s\\n' "$0"; exit 0; fi\necho 'Error: no venv here' >&2\nexit 1\n`,
  );
  chmodSync(python, 0o755);
  return python;
}

/** the venv steps started while `fn` runs (polar says each one: the build runs in a sandbox, so the
 * interpreter cannot count them in a file of the test) */
async function venvSteps(fn: () => Promise<unknown>): Promise<number> {
  let steps = 0;
  const info = log.info;
  log.info = (message: string) => {
    if (/: venv$/.test(message)) steps++;
  };
  try {
    await fn();
  } finally {
    log.info = info;
  }
  return steps;
}

test('a failed build is an error naming the step, with its log; every sample of the run gets it, none builds it again', async () => {
  const dir = tempDir('polar-envbuild-');
  const python = failingPython(dir);
  const envs = new Environments({ cacheDir: join(dir, 'cache'), reposDir: dir });
  const r = recipe({ python });
  let a!: PromiseSettledResult<unknown>;
  let b!: PromiseSettledResult<unknown>;
  let again: unknown;
  const steps = await venvSteps(async () => {
    [a, b] = await Promise.allSettled([envs.ensure(r), envs.ensure(r)]);
    again = await envs.ensure(r).catch((e: unknown) => e);
  });
  assert.equal(a.status, 'rejected');
  const error = (a as PromiseRejectedResult).reason as EnvBuildError;
  assert.ok(error instanceof EnvBuildError);
  assert.match(error.message, /environment x\/y 1\.0: venv failed: Error: no venv here/);
  assert.match(error.log, /-m venv/);
  assert.equal((b as PromiseRejectedResult).reason, error);
  assert.equal(again, error);
  assert.equal(steps, 1);
  // nothing of it is kept but its log: the next run (a new Environments: --resume) tries again
  const failedLog = readdirSync(join(dir, 'cache')).find((n) => n.endsWith('.failed.log'));
  assert.match(String(failedLog), /^x__y-1\.0-[0-9a-f]{12}\.failed\.log$/);
  const failed = readFileSync(join(dir, 'cache', String(failedLog)), 'utf8');
  assert.match(failed, /no venv here/);
  const fresh = new Environments({ cacheDir: join(dir, 'cache'), reposDir: dir });
  assert.equal(await venvSteps(() => fresh.ensure(r).catch(() => {})), 1);
});

test('a lock held by a live process is waited for; one whose owner died is taken over', async () => {
  const dir = tempDir('polar-lock-');
  const lock = join(dir, 'env.lock');
  mkdirSync(lock);
  writeFileSync(join(lock, 'owner'), `999999999\n${hostname()}\n`);
  assert.equal(await withLock(lock, async () => 'taken over', { pollMs: 10 }), 'taken over');
  assert.equal(existsSync(lock), false);
  const order: string[] = [];
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  const first = withLock(lock, async () => {
    order.push('first in');
    await held;
    order.push('first out');
  });
  await new Promise((r) => setTimeout(r, 30));
  const second = withLock(lock, async () => order.push('second in'), { pollMs: 10 });
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(order, ['first in']);
  release();
  await Promise.all([first, second]);
  assert.deepEqual(order, ['first in', 'first out', 'second in']);
});
