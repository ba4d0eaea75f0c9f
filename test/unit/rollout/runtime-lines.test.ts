/**
 * The command lines of the sandbox (bwrap), apptainer and docker runtimes, built without running
 * anything (apptainer cannot run on the machines polar is developed on: these are its only tests), the
 * classification of a limit hit, the cgroup v2 path against a stand-in cgroup folder, and the doctor's
 * fixes for the bwrap failures users report.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadDataset } from '../../../src/rollout/dataset.ts';
import type { ExecResult } from '../../../src/rollout/exec.ts';
import {
  apptainerDialect,
  apptainerExecArgs,
  apptainerImage,
  apptainerLaunch,
  apptainerStartArgs,
} from '../../../src/rollout/runtime/apptainer.ts';
import { bwrapArgs, inCgroup, limitedCommand, ulimitFlags } from '../../../src/rollout/runtime/bwrap.ts';
import { createRuntime } from '../../../src/rollout/runtime/create.ts';
import { ContainerRuntime } from '../../../src/rollout/runtime/docker.ts';
import {
  checkCgroupParent,
  classifyEnd,
  eventCount,
  SandboxCgroup,
} from '../../../src/rollout/runtime/limits.ts';
import { knownFix } from '../../../src/rollout/runtime/probe.ts';
import { execResult } from '../../support/exec-result.ts';
import { tempDir } from '../../support/temp.ts';
import { MINI, REPOS as REPOS_DIR } from './run/helpers.ts';

describe('bwrap command lines', () => {
  const system = [{ path: '/usr' }, { path: '/bin', symlink: 'usr/bin' }, { path: '/etc' }];
  const binds = [
    { host: '/tmp/env/repo', inside: '/testbed', writable: true },
    { host: '/root/polar/node_modules', inside: '/root/polar/node_modules' },
  ];

  test('user mode: a user namespace without nested ones, loopback only, a private /tmp, the binds', () => {
    const argv = bwrapArgs(
      { mode: 'user', system, binds, chdir: '/testbed', network: 'none', tmpBytes: 1024 },
      ['bash', '-c', 'true'],
    );
    assert.deepEqual(argv.slice(0, 11), [
      'bwrap',
      '--die-with-parent',
      '--new-session',
      '--unshare-user',
      '--disable-userns',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-cgroup-try',
      '--unshare-net',
      '--hostname',
    ]);
    const joined = argv.join(' ');
    assert.match(joined, / --ro-bind \/usr \/usr --symlink usr\/bin \/bin --ro-bind \/etc \/etc /);
    assert.match(joined, / --proc \/proc --dev \/dev --perms 1777 --size 1024 --tmpfs \/tmp /);
    assert.match(joined, / --bind \/tmp\/env\/repo \/testbed /);
    // the directories above a bind are made traversable, once
    assert.match(
      joined,
      / --perms 0755 --dir \/root --perms 0755 --dir \/root\/polar --ro-bind \/root\/polar\/node_modules /,
    );
    assert.deepEqual(argv.slice(argv.indexOf('--')), ['--', 'bash', '-c', 'true']);
    assert.doesNotMatch(joined, /--(ro-)?bind \/ \//, 'nothing binds the whole root');
  });

  test('root mode: no user namespace, the command drops to its own uid after its rlimits; host network when asked', () => {
    const argv = bwrapArgs(
      {
        mode: 'root',
        uid: 1234567,
        system,
        binds: [],
        chdir: '/testbed',
        network: 'host',
        limits: { memoryBytes: 2 * 1024 ** 3, pids: 64, diskBytes: 1024 ** 2 },
      },
      ['pi', '-p', 'x'],
    );
    assert.ok(!argv.includes('--unshare-user') && !argv.includes('--unshare-net'));
    assert.deepEqual(argv.slice(argv.indexOf('--')), [
      '--',
      'bash',
      '-c',
      'ulimit -S -H -d 2097152 -u 64 -f 1024 && exec "$@"',
      'polar-limits',
      'setpriv',
      '--reuid=1234567',
      '--regid=1234567',
      '--clear-groups',
      '--no-new-privs',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--',
      'pi',
      '-p',
      'x',
    ]);
    assert.deepEqual(ulimitFlags({}), []);
    assert.deepEqual(limitedCommand({ mode: 'user' }, ['x']), ['x']);
    assert.deepEqual(inCgroup('/sys/fs/cgroup/p/s1/cgroup.procs', ['bwrap']), [
      'sh',
      '-c',
      'echo $$ > "$0" && exec "$@"',
      '/sys/fs/cgroup/p/s1/cgroup.procs',
      'bwrap',
    ]);
  });
});

describe('apptainer command lines (no engine here: these are its tests)', () => {
  test('instance start: contained, clean environment, writable tmpfs, loopback-only network, limits, binds', () => {
    assert.deepEqual(
      apptainerStartArgs('polar-agent-x', 'docker://swebench/sweb.eval.x86_64.a_1776_b-1:latest', {
        mounts: [
          { host: '/h/node', container: '/polar/bin/node' },
          { host: '/tmp/polar-container-1', container: '/tmp/polar-container-1', readonly: false },
        ],
        limits: { memoryBytes: 1024, pids: 64 },
      }),
      [
        'apptainer',
        'instance',
        'start',
        '--containall',
        '--cleanenv',
        '--writable-tmpfs',
        '--net',
        '--network',
        'none',
        '--memory',
        '1024',
        '--pids-limit',
        '64',
        '--bind',
        '/h/node:/polar/bin/node:ro',
        '--bind',
        '/tmp/polar-container-1:/tmp/polar-container-1',
        'docker://swebench/sweb.eval.x86_64.a_1776_b-1:latest',
        'polar-agent-x',
      ],
    );
    assert.ok(
      !apptainerStartArgs('n', 'i.sif', { network: 'host' }).includes('--net'),
      'host: no new namespace',
    );
  });

  test('exec, the harness launch (variables as APPTAINERENV_*, never on the command line), images', () => {
    const exec = apptainerExecArgs('n1', 'pytest -rA', { timeoutMs: 2000, path: ['/envs/a/bin'] });
    assert.deepEqual(exec.slice(0, 10), [
      'apptainer',
      'exec',
      '--cleanenv',
      '--pwd',
      '/testbed',
      'instance://n1',
      'timeout',
      '--signal=TERM',
      '--kill-after=5',
      '2',
    ]);
    assert.match(
      exec.at(-1)!,
      /conda activate testbed; fi\nexport PATH='\/envs\/a\/bin':"\$PATH"\npytest -rA$/,
    );
    const launch = apptainerLaunch('n1', ['/polar/bin/node', 'pi.js'], ['POLAR_API_KEY', 'UNSET'], {
      PATH: '/usr/bin',
      POLAR_API_KEY: 'polar-secret-key',
    });
    assert.deepEqual(launch.command, [
      'apptainer',
      'exec',
      '--cleanenv',
      '--pwd',
      '/testbed',
      'instance://n1',
      '/polar/bin/node',
      'pi.js',
    ]);
    assert.equal(launch.env.APPTAINERENV_POLAR_API_KEY, 'polar-secret-key');
    assert.equal(launch.env.PATH, '/usr/bin');
    assert.ok(!('APPTAINERENV_UNSET' in launch.env));
    assert.ok(!launch.command.join(' ').includes('polar-secret-key'));
    assert.equal(apptainerImage('swebench/x:latest'), 'docker://swebench/x:latest');
    assert.equal(apptainerImage('/images/a.sif'), '/images/a.sif');
    assert.equal(apptainerImage('oras://r/x:1'), 'oras://r/x:1');
  });

  test('the apptainer runtime through a recording runner: start, scrub, write, the harness behind the forwarder, stop', async () => {
    const calls: Array<{ argv: string[]; input?: string }> = [];
    const runner = async (argv: string[], o: { input?: string }): Promise<ExecResult> => {
      calls.push({ argv, ...(o.input !== undefined ? { input: o.input } : {}) });
      return execResult();
    };
    const rt = new ContainerRuntime({
      engine: 'apptainer',
      dialect: apptainerDialect(),
      harness: true,
      runner,
      mounts: [],
    });
    const [instance] = await loadDataset(MINI);
    await rt.check();
    const env = await rt.prepare(instance!, 'agent');
    await env.writeFile('x.diff', 'abc');
    const launch = await env.launchHarness({
      argv: ['/polar/bin/node', 'pi.js'],
      env: { POLAR_API_KEY: 'k' },
      passEnv: ['POLAR_API_KEY'],
      proxyUrl: 'http://127.0.0.1:4321',
      runDir: `${env.harnessDirBase}/run`,
    });
    await launch.close();
    await env.dispose();
    assert.deepEqual(calls[0]!.argv, ['apptainer', '--version']);
    assert.deepEqual(calls[1]!.argv.slice(0, 3), ['apptainer', 'instance', 'start']);
    assert.ok(
      calls[1]!.argv.includes('docker://swebench/sweb.eval.x86_64.polar-fixtures_1776_textkit-1:latest'),
    );
    assert.match(calls[2]!.argv.at(-1)!, /repack -a -d/, 'the history scrub');
    assert.equal(calls[3]!.input, 'abc');
    const forwarder = launch.command.indexOf('/polar/forward.mjs');
    assert.match(launch.command[forwarder + 1]!, /^4321=\/.*polar-container-[^/]+\/sock\/port-0\.sock$/);
    assert.deepEqual(calls.at(-1)!.argv.slice(0, 3), ['apptainer', 'instance', 'stop']);
  });
});

describe('docker: a private folder per container, never shared', () => {
  test('two containers get two folders; none of them uses the host network', async () => {
    const runs: string[][] = [];
    const runner = async (argv: string[]): Promise<ExecResult> => {
      if (argv[1] === 'run') runs.push(argv);
      return execResult();
    };
    const rt = new ContainerRuntime({ engine: 'docker', harness: true, runner });
    const [instance] = await loadDataset(MINI);
    const [a, b] = await Promise.all([rt.prepare(instance!, 'agent'), rt.prepare(instance!, 'agent')]);
    assert.notEqual(a.harnessDirBase, b.harnessDirBase);
    const mounts = runs.map((r) => r.filter((_x, i) => r[i - 1] === '-v'));
    assert.ok(
      mounts[0]!.every((m) => !mounts[1]!.includes(m)),
      'no mount shared between the two',
    );
    for (const run of runs)
      assert.deepEqual(run.slice(run.indexOf('--network'), run.indexOf('--network') + 2), [
        '--network',
        'none',
      ]);
    await Promise.all([a.dispose(), b.dispose()]);
  });
});

describe('limits', () => {
  test('a run end classified: time, memory, processes, disk; a completed run is no hit', () => {
    const end = (o: Partial<Parameters<typeof classifyEnd>[0]>) =>
      classifyEnd({ status: 'error', exitCode: 1, signal: null, output: '', ...o });
    assert.equal(end({ status: 'timeout' }), 'agent_timeout');
    assert.equal(end({ output: 'RangeError: Array buffer allocation failed' }), 'agent_oom');
    assert.equal(
      end({ exitCode: 134, output: "terminate called after throwing an instance of 'std::bad_alloc'" }),
      'agent_oom',
    );
    assert.equal(end({ output: 'Error: spawnSync true EAGAIN' }), 'agent_pids');
    assert.equal(end({ output: 'bash: fork: retry: Resource temporarily unavailable' }), 'agent_pids');
    assert.equal(end({ exitCode: 153 }), 'agent_disk');
    assert.equal(end({ output: 'SyntaxError: bad' }), null);
    assert.equal(end({ status: 'completed', output: 'MemoryError in a tool call the model saw' }), null);
    assert.equal(end({}), null);
    assert.equal(
      classifyEnd({ status: 'error', exitCode: 137, signal: null, output: '' }, { oomKills: 1, pidsMax: 0 }),
      'agent_oom',
    );
    assert.equal(
      classifyEnd({ status: 'error', exitCode: 1, signal: null, output: '' }, { oomKills: 0, pidsMax: 3 }),
      'agent_pids',
    );
    assert.equal(eventCount('low 0\nhigh 0\nmax 0\noom 2\noom_kill 1\n', 'oom_kill'), 1);
  });

  test('cgroup v2 path against a stand-in cgroup folder: checked, limits written, events read (no delegated cgroup here)', async () => {
    const parent = tempDir('polar-cgroup-');
    assert.deepEqual(await checkCgroupParent(join(parent, 'none')), {
      ok: false,
      why: `${join(parent, 'none')} is not a writable cgroup v2 directory (ENOENT: no such file or directory, open '${join(parent, 'none', 'cgroup.subtree_control')}')`,
    });
    writeFileSync(join(parent, 'cgroup.subtree_control'), 'cpu pids\n');
    assert.match(JSON.stringify(await checkCgroupParent(parent)), /lacks memory/);
    writeFileSync(join(parent, 'cgroup.subtree_control'), 'cpu memory pids\n');
    assert.deepEqual(await checkCgroupParent(parent), { ok: true });
    const cg = await SandboxCgroup.create(parent, 'polar-s1', { memoryBytes: 1 << 30, pids: 64 });
    assert.equal(readFileSync(join(parent, 'polar-s1/memory.max'), 'utf8'), String(1 << 30));
    assert.equal(readFileSync(join(parent, 'polar-s1/pids.max'), 'utf8'), '64');
    assert.equal(cg.procs, join(parent, 'polar-s1/cgroup.procs'));
    writeFileSync(join(parent, 'polar-s1/memory.events'), 'oom 1\noom_kill 1\n');
    assert.deepEqual(await cg.events(), { oomKills: 1, pidsMax: 0 });
  });
});

test('the doctor names the fix for the bwrap failures users report', () => {
  assert.match(
    knownFix('bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted')!,
    /AppArmor.*bwrap-userns-restrict.*15057, 15982/s,
  );
  assert.match(knownFix('bwrap: setting up uid map: Permission denied')!, /AppArmor/);
  assert.match(
    knownFix('bwrap: Failed to make / slave: Permission denied')!,
    /CAP_SYS_ADMIN.*make-rshared.*15434, 23468/s,
  );
  assert.match(knownFix("bwrap: Can't mount proc on /newroot/proc: Operation not permitted")!, /seccomp/);
  assert.match(knownFix('bwrap: No permissions to create new namespace')!, /unprivileged_userns_clone/);
  assert.equal(knownFix('something else'), undefined);
});

test('runtime flags that only the sandbox takes are refused elsewhere; a bad --cgroup-parent stops the run', async () => {
  const base = { repos: REPOS_DIR };
  await assert.rejects(
    createRuntime(
      { ...base, kind: 'docker', networkAllow: [{ host: '127.0.0.1', port: 1 }] },
      { harness: null },
    ),
    /--network-allow is for --runtime sandbox/,
  );
  await assert.rejects(
    createRuntime({ ...base, kind: 'local', cgroupParent: '/sys/fs/cgroup/x' }, { harness: null }),
    /--cgroup-parent is for --runtime sandbox/,
  );
  await assert.rejects(
    createRuntime({ ...base, kind: 'sandbox', network: 'bridge' }, { harness: null }),
    /--network bridge: the sandbox takes none or host/,
  );
  const rt = await createRuntime(
    { ...base, kind: 'sandbox', cgroupParent: join(tmpdir(), 'polar-no-such-cgroup'), limits: { pids: 8 } },
    { harness: null },
  );
  await assert.rejects(
    rt.check([]),
    /--cgroup-parent: .*polar-no-such-cgroup is not a writable cgroup v2 directory/,
  );
});
