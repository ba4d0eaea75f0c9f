import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import type { SweInstance } from '../../../src/rollout/dataset.ts';
import { loadDataset } from '../../../src/rollout/dataset.ts';
import type { ExecResult } from '../../../src/rollout/exec.ts';
import { gradePatch } from '../../../src/rollout/grade.ts';
import {
  buildExecArgs,
  buildHostCommand,
  buildRunArgs,
  ContainerRuntime,
  envSetupLines,
  officialImage,
  sweGymImage,
} from '../../../src/rollout/runtime/docker.ts';
import { specFor } from '../../../src/rollout/specs.ts';
import { execResult } from '../../support/exec-result.ts';
import { MINI } from './run/helpers.ts';

test('official image names use _1776_ and lower case', () => {
  assert.equal(
    officialImage('django__django-11099'),
    'swebench/sweb.eval.x86_64.django_1776_django-11099:latest',
  );
  assert.equal(officialImage('Project__Repo-1'), 'swebench/sweb.eval.x86_64.project_1776_repo-1:latest');
  assert.equal(sweGymImage('getmoto__moto-5752'), 'xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5752:latest');
});

test('container command lines: no host network by default, limits as engine flags', () => {
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
    'none',
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
  const limited = buildRunArgs('docker', 'c1', 'img', {
    network: 'polar-net',
    limits: { memoryBytes: 2 ** 30, pids: 64, diskBytes: 2 ** 20 },
  });
  assert.deepEqual(limited.slice(8, 20), [
    '--network',
    'polar-net',
    '--platform',
    'linux/amd64',
    '--memory',
    '1073741824b',
    '--memory-swap',
    '1073741824b',
    '--pids-limit',
    '64',
    '--ulimit',
    'fsize=1048576:1048576',
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
  // host environments (types.ts): first on PATH after the conda env
  assert.match(
    buildExecArgs('docker', 'c1', 'pytest', { path: ['/envs/a/bin'] }).at(-1)!,
    /conda activate testbed; fi\nexport PATH='\/envs\/a\/bin':"\$PATH"\npytest$/,
  );
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
    return execResult({ stdout: 'ok' });
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
  // the image's repository is stripped of history after HEAD before anything else runs
  assert.deepEqual(calls[2]!.slice(0, 2), ['docker', 'exec']);
  assert.match(
    calls[2]!.at(-1)!,
    /git checkout -q --detach HEAD.*update-ref --stdin.*repack -a -d -q && git prune --expire=now/s,
  );
  assert.deepEqual(calls[3]!.slice(0, 4), ['docker', 'exec', '-i', calls[1]![5]]);
  assert.equal(calls[3]!.at(-2), '/testbed/a.diff');
  assert.equal(calls[3]!.at(-1), '<stdin:3>');
  assert.deepEqual(calls[5], ['docker', 'rm', '-f', calls[1]![5]]);
});

const row = (over: Partial<SweInstance>): SweInstance => ({
  instance_id: 'django__django-1',
  repo: 'django/django',
  base_commit: 'abc123',
  patch: '',
  test_patch: 'diff --git a/tests/view_tests/tests/test_i18n.py b/tests/view_tests/tests/test_i18n.py\n',
  problem_statement: '',
  hints_text: '',
  created_at: '',
  version: '3.1',
  FAIL_TO_PASS: [],
  PASS_TO_PASS: [],
  ...over,
});

const setupOf = (over: Partial<SweInstance>) => {
  const spec = specFor(row(over));
  assert.ok(!('error' in spec));
  return envSetupLines(spec.setup);
};

test('environment set-up lines: eval_commands and the reinstall of the official eval script (v4.1.0)', () => {
  assert.deepEqual(setupOf({ version: '2.2' }), [
    'export LANG=en_US.UTF-8',
    'export LC_ALL=en_US.UTF-8',
    'export PYTHONIOENCODING=utf8',
    'export LANGUAGE=en_US:en',
    'git config --global --add safe.directory /testbed',
    'cd /testbed',
    'if [ -f /opt/miniconda3/bin/activate ]; then . /opt/miniconda3/bin/activate && conda activate testbed; fi',
    'python setup.py install',
  ]);
  const d31 = setupOf({ version: '3.1' });
  assert.equal(d31[0], "sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen");
  assert.equal(d31.at(-1), 'python -m pip install -e .');
  assert.equal(setupOf({ version: '4.0' })[0], 'git config --global --add safe.directory /testbed');
  assert.equal(
    setupOf({ repo: 'scikit-learn/scikit-learn', version: '1.3' }).at(-1),
    'python -m pip install -v --no-use-pep517 --no-build-isolation -e .',
  );
  assert.equal(
    setupOf({ repo: 'astropy/astropy', version: '5.0' }).at(-1),
    'python -m pip install -e .[test] --verbose',
  );
  assert.equal(setupOf({ repo: 'psf/requests', version: '2.0' }).at(-1), 'python -m pip install .');
  // a row with its own test_cmd (other datasets) has no set-up
  assert.deepEqual(setupOf({ repo: 'x/y', test_cmd: 'pytest -rA' }), []);
});

test('a graded row runs its set-up in the container before the tests; a 5.x eval_script gets the exit-code capture', async () => {
  const scripts: string[] = [];
  const runner = async (argv: string[]): Promise<ExecResult> => {
    if (argv[1] === 'exec' && argv.at(-3) === 'bash') scripts.push(argv.at(-1)!);
    return execResult();
  };
  const rt = new ContainerRuntime({ engine: 'docker', runner });
  const g = await gradePatch(rt, row({ version: '2.2' }), 'diff --git a/x b/x\n', { testTimeoutMs: 5000 });
  assert.equal(g.status, 'unresolved');
  // the set-up, the restore and the test patch in one script, then the tests in one of their own
  // (src/rollout/integrity/harden.ts)
  const [prepare, tests] = scripts.slice(-2) as [string, string];
  const at = (text: string) => prepare.indexOf(text);
  assert.ok(at('export LANG=en_US.UTF-8') > 0, prepare);
  assert.ok(at('export LANG=en_US.UTF-8') < at('python setup.py install'));
  assert.ok(at('python setup.py install') < at("apply --verbose '/tmp/polar-test.diff'"));
  assert.ok(
    tests.includes(
      "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 'view_tests.tests.test_i18n'",
    ),
    tests,
  );
  scripts.length = 0;
  const evalScript =
    "#!/bin/bash\nset -uxo pipefail\ngit apply -v /tmp/t.diff\n: '>>>>> Start Test Output'\npytest -rA t.py\n: '>>>>> End Test Output'\ngit checkout abc t.py\n";
  await gradePatch(
    rt,
    row({ eval_script: evalScript, log_parser: 'parse_log_pytest' }),
    'diff --git a/x b/x\n',
    {
      testTimeoutMs: 5000,
    },
  );
  assert.match(
    scripts.at(-1)!,
    /conda activate testbed; fi\n#!\/bin\/bash\nset -uxo pipefail\ngit apply -v \/tmp\/t.diff\n: '>>>>> Start Test Output'\npytest -rA t.py\nSWEBENCH_TEST_EXIT_CODE=\$\?\n: '>>>>> End Test Output'\necho ">>>>> Test Exit Code: \$SWEBENCH_TEST_EXIT_CODE"\ngit checkout abc t.py\n$/,
  );
});

test('ContainerRuntime.check reports a missing engine', async () => {
  const runner = async (): Promise<ExecResult> =>
    execResult({ exitCode: 1, stderr: 'Cannot connect to the Docker daemon' });
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
