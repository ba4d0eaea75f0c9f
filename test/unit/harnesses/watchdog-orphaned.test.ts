/**
 * A harness in a container outlives polar's death unless the watchdog removes its container (issue 27,
 * the docker runtime): killing the `docker exec` client leaves the process in the container running
 * (moby/moby#9098, docker/cli#5309), so ending the client's process group, all the watchdog can do on
 * this host, is not enough. Against the docker stand-in in its engine mode (test/support/fake-docker.mjs,
 * FAKE_DOCKER_STATE: the exec'd command runs under a shim, nobody's child here; `rm -f` kills it): a
 * polar (runHarnessProcess in a process of its own) runs a harness through `exec`, and is killed with
 * SIGKILL. Without `orphaned` the harness in the container runs on, its client gone; with the container
 * runtime's `orphaned` (its `rm -f`, HarnessLaunch.orphaned) the watchdog removes the container and the
 * harness ends with it. And the container runtime hands that command with every harness it launches.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import { loadDataset } from '../../../src/rollout/dataset.ts';
import type { ExecResult } from '../../../src/rollout/exec.ts';
import { apptainerDialect } from '../../../src/rollout/runtime/apptainer.ts';
import { ContainerRuntime } from '../../../src/rollout/runtime/docker.ts';
import { ROOT } from '../../support/cli.ts';
import { execResult } from '../../support/exec-result.ts';
import { procStat, running } from '../../support/processes.ts';
import { tempDir } from '../../support/temp.ts';
import { MINI } from '../rollout/run/helpers.ts';

const FAKE = join(ROOT, 'test/support/fake-docker.mjs');

/** whether `ancestor` is `pid`'s parent, or its parent's, and so on */
function descends(pid: number, ancestor: number): boolean {
  for (let p = procStat(pid)?.ppid ?? 0; p > 1; p = procStat(p)?.ppid ?? 0) if (p === ancestor) return true;
  return false;
}

/** Polls `ready` every 50 ms for at most `ms` (a bound, not a measure: the checks fail rather than hang). */
async function until(ready: () => boolean, ms: number): Promise<boolean> {
  for (const t0 = Date.now(); !ready(); await new Promise((r) => setTimeout(r, 50)))
    if (Date.now() - t0 > ms) return false;
  return true;
}

/**
 * A polar that runs one harness through the stand-in's `exec` into container `c1` (with the runtime's
 * `orphaned` command when `orphaned`) and waits; the harness writes its pid to `pidFile`, then runs until
 * ended (or 60 s).
 */
function polarWithHarness(state: string, pidFile: string, orphaned: boolean) {
  const harness = `require('fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setTimeout(() => {}, 60000);`;
  const script = `
    const { runHarnessProcess } = await import(${JSON.stringify(join(ROOT, 'src/harnesses/process.ts'))});
    await runHarnessProcess(process.execPath, [${JSON.stringify(FAKE)}, 'exec', '-i', 'c1', process.execPath, '-e', ${JSON.stringify(harness)}], {
      env: { FAKE_DOCKER_STATE: ${JSON.stringify(state)} },
      stdio: 'pipe',
      stdin: 'ignore',
      runDir: null,
      ${orphaned ? `orphaned: [process.execPath, ${JSON.stringify(FAKE)}, 'rm', '-f', 'c1'],` : ''}
    });`;
  return execa(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: ROOT,
    env: { FAKE_DOCKER_STATE: state },
    reject: false,
    stdin: 'ignore',
  });
}

/** Runs a polar, waits for its harness in the container, kills polar with SIGKILL; the pids involved. */
async function killPolarMidRun(orphaned: boolean) {
  const dir = tempDir('polar-watchdog-orphaned-');
  const state = join(dir, 'engine');
  const pidFile = join(dir, 'harness.pid');
  const polar = polarWithHarness(state, pidFile, orphaned);
  const started = await until(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8') !== '', 30_000);
  if (!started) {
    polar.kill('SIGKILL');
    assert.fail(`the harness never started\n${(await polar).stderr}`);
  }
  const harness = Number(readFileSync(pidFile, 'utf8'));
  const clientFile = readdirSync(join(state, 'c1')).find((f) => f.endsWith('.client'))!;
  const client = Number(readFileSync(join(state, 'c1', clientFile), 'utf8'));
  // the stand-in's engine: the command is no descendant of polar nor of the client (what the watchdog walks)
  assert.ok(!descends(harness, polar.pid!), 'the harness in the container is not under polar');
  assert.ok(!descends(harness, client), 'nor under its exec client');
  polar.kill('SIGKILL');
  await polar;
  return { state, harness, client };
}

describe('a harness run through `docker exec` when polar dies (SIGKILL)', () => {
  test('without the runtime’s command the watchdog ends the client, and the harness in the container runs on', async () => {
    const { state, harness, client } = await killPolarMidRun(false);
    try {
      assert.ok(await until(() => !running(client), 30_000), 'the watchdog ended the exec client');
      assert.ok(running(harness), 'the process in the container outlived its client (moby/moby#9098)');
    } finally {
      await execa(process.execPath, [FAKE, 'rm', '-f', 'c1'], { env: { FAKE_DOCKER_STATE: state } });
    }
    assert.ok(await until(() => !running(harness), 30_000), 'rm -f ended it');
  });

  test('with the runtime’s `rm -f` the watchdog removes the container, and the harness ends with it', async () => {
    const { state, harness, client } = await killPolarMidRun(true);
    try {
      assert.ok(await until(() => !running(harness), 30_000), 'the harness in the container ended');
      assert.ok(!running(client));
      assert.ok(await until(() => !existsSync(join(state, 'c1')), 30_000), 'the container is gone');
    } finally {
      if (running(harness)) process.kill(harness, 'SIGKILL');
    }
  });
});

describe('the container runtime hands its removal with every harness it launches', () => {
  for (const engine of ['docker', 'podman', 'apptainer'] as const)
    test(engine, async () => {
      const calls: string[][] = [];
      const runner = async (argv: string[]): Promise<ExecResult> => {
        calls.push(argv);
        return execResult();
      };
      const dialect = engine === 'apptainer' ? { dialect: apptainerDialect() } : {};
      const rt = new ContainerRuntime({ engine, ...dialect, harness: true, runner, mounts: [] });
      const [instance] = await loadDataset(MINI);
      const env = await rt.prepare(instance!, 'agent');
      const launch = await env.launchHarness({
        argv: ['/polar/bin/node', 'pi.js'],
        env: {},
        passEnv: [],
        proxyUrl: 'http://127.0.0.1:4321',
        runDir: `${env.harnessDirBase}/run`,
      });
      await launch.close();
      await env.dispose();
      // the very command the runtime removes the container with once the sample is done
      assert.ok(launch.orphaned && launch.orphaned.length > 0, JSON.stringify(launch));
      assert.deepEqual(launch.orphaned, calls.at(-1));
      if (engine !== 'apptainer') assert.deepEqual(launch.orphaned.slice(0, 3), [engine, 'rm', '-f']);
    });
});
