import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { loadDataset } from '../../../src/eval/dataset.ts';
import type { ExecResult } from '../../../src/eval/exec.ts';
import {
  buildExecArgs,
  buildHostCommand,
  buildRunArgs,
  ContainerRuntime,
  officialImage,
  sweGymImage,
} from '../../../src/eval/runtime/docker.ts';
import { MINI } from './helpers.ts';

test('official image names use _1776_ and lower case', () => {
  assert.equal(
    officialImage('django__django-11099'),
    'swebench/sweb.eval.x86_64.django_1776_django-11099:latest',
  );
  assert.equal(officialImage('Project__Repo-1'), 'swebench/sweb.eval.x86_64.project_1776_repo-1:latest');
  assert.equal(sweGymImage('getmoto__moto-5752'), 'xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5752:latest');
});

test('container command lines', () => {
  const run = buildRunArgs('podman', 'c1', 'img:latest', {
    mounts: [{ host: '/h/node', container: '/polar/bin/node' }],
  });
  assert.deepEqual(run, [
    'podman',
    'run',
    '-d',
    '--rm',
    '--name',
    'c1',
    '-w',
    '/testbed',
    '--network',
    'host',
    '--platform',
    'linux/amd64',
    '-v',
    '/h/node:/polar/bin/node:ro',
    '--entrypoint',
    'tail',
    'img:latest',
    '-f',
    '/dev/null',
  ]);
  const exec = buildExecArgs('docker', 'c1', 'pytest -rA', { timeoutMs: 1500 });
  assert.deepEqual(exec.slice(0, 9), [
    'docker',
    'exec',
    '-w',
    '/testbed',
    'c1',
    'timeout',
    '--signal=TERM',
    '--kill-after=5',
    '2',
  ]);
  assert.match(exec.at(-1)!, /conda activate testbed; fi\npytest -rA$/);
  assert.deepEqual(buildHostCommand('docker', 'c1', ['pi', '-p', 'x'], ['OPENAI_BASE_URL']), [
    'docker',
    'exec',
    '-i',
    '-w',
    '/testbed',
    '-e',
    'OPENAI_BASE_URL',
    'c1',
    'pi',
    '-p',
    'x',
  ]);
});

test('ContainerRuntime drives the engine through its runner (fake engine)', async () => {
  const calls: string[][] = [];
  const runner = async (argv: string[], o: { input?: string }): Promise<ExecResult> => {
    calls.push(o.input === undefined ? argv : [...argv, `<stdin:${o.input.length}>`]);
    return { exitCode: 0, signal: null, output: 'ok', timedOut: false, durationMs: 1 };
  };
  const rt = new ContainerRuntime({ engine: 'docker', runner });
  const [instance] = await loadDataset(MINI);
  await rt.check();
  const env = await rt.prepare(instance!, 'grade');
  await env.writeFile('a.diff', 'xyz');
  await env.exec('true', { timeoutMs: 10_000 });
  await env.dispose();
  assert.deepEqual(calls[0], ['docker', 'info', '--format', '{{.ServerVersion}}']);
  assert.equal(calls[1]![1], 'run');
  assert.ok(calls[1]!.includes(officialImage(instance!.instance_id)));
  assert.deepEqual(calls[2]!.slice(0, 4), ['docker', 'exec', '-i', calls[1]![5]]);
  assert.equal(calls[2]!.at(-2), '/testbed/a.diff');
  assert.equal(calls[2]!.at(-1), '<stdin:3>');
  assert.deepEqual(calls[4], ['docker', 'rm', '-f', calls[1]![5]]);
});

test('ContainerRuntime.check reports a missing engine', async () => {
  const runner = async (): Promise<ExecResult> => ({
    exitCode: 1,
    signal: null,
    output: 'Cannot connect to the Docker daemon',
    timedOut: false,
    durationMs: 1,
  });
  await assert.rejects(new ContainerRuntime({ runner }).check(), /docker is not usable: Cannot connect/);
});

const engine = spawnSync('docker', ['info'], { stdio: 'ignore', timeout: 20_000 }).status === 0;
test(
  'docker engine: a real container round trip',
  { skip: engine ? false : 'docker info failed: no engine on this machine' },
  async () => {
    const rt = new ContainerRuntime({ image: () => 'busybox:latest' });
    const [instance] = await loadDataset(MINI);
    const env = await rt.prepare(instance!, 'grade');
    try {
      const r = await env.exec('echo hi', { timeoutMs: 30_000 });
      assert.match(r.output, /hi/);
    } finally {
      await env.dispose();
    }
  },
);
