/**
 * The sandbox runtime with real bubblewrap (issue 23 items 1, 4, 5): what a command inside sees and
 * reaches, the proxy path through the Unix socket and forwarder, no future history, the process tree
 * ending with the command, the limits (memory, a fork bomb, file size) and four sandboxes at once.
 * Runs as the machine's user: as root, every environment gets an unprivileged uid of its own.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadDataset, type SweInstance } from '../../../src/rollout/dataset.ts';
import { execTree } from '../../../src/rollout/exec.ts';
import { classifyEnd } from '../../../src/rollout/runtime/limits.ts';
import { probeSandbox } from '../../../src/rollout/runtime/probe.ts';
import { SandboxRuntime } from '../../../src/rollout/runtime/sandbox.ts';
import type { InstanceEnv } from '../../../src/rollout/runtime/types.ts';
import { futureRepos, hunterScript } from '../../support/future-repo.ts';
import { tempDir } from '../../support/temp.ts';
import { MINI } from './run/helpers.ts';

const TASK = 'polar-fixtures__jsutil-5';
const probe = await probeSandbox();
const SKIP = probe.ok ? false : `bubblewrap does not work here: ${probe.error} (${probe.fix})`;

/** runs `argv` as runCapture runs a harness once its proxy (on `proxyPort`) listens; its output */
async function runAsHarness(e: InstanceEnv, argv: string[], proxyPort: number): Promise<string> {
  const runDir = join(e.harnessDirBase!, `run-${Math.random().toString(36).slice(2)}`);
  mkdirSync(runDir);
  const launch = await e.launchHarness({
    argv,
    env: { PATH: process.env.PATH ?? '' },
    passEnv: [],
    proxyUrl: `http://127.0.0.1:${proxyPort}`,
    runDir,
  });
  try {
    const [file, ...args] = launch.command;
    const r = await execTree(file!, args, {
      cwd: launch.cwd,
      env: launch.env,
      extendEnv: false,
      timeoutMs: 60_000,
    });
    return r.output;
  } finally {
    await launch.close();
  }
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return (server.address() as { port: number }).port;
}

describe('sandbox runtime (bubblewrap)', { skip: SKIP }, () => {
  const future = futureRepos(TASK);
  const outside = tempDir('polar-sandbox-outside-');
  writeFileSync(join(outside, 'secret.txt'), 'host-secret-0001\n');
  let instance: SweInstance;
  let runtime: SandboxRuntime;
  let env: InstanceEnv;
  before(async () => {
    [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === TASK) as [SweInstance];
    runtime = new SandboxRuntime({
      reposDir: future.reposDir,
      limits: { memoryBytes: 512 * 1024 ** 2, pids: 96, diskBytes: 8 * 1024 ** 2 },
    });
    await runtime.check([instance]);
    env = await runtime.prepare(instance, 'agent');
  });
  after(() => env?.dispose());

  test('the tree is writable at /testbed; the host, its home, --repos and the outside are not there', async () => {
    const r = await env.exec(
      [
        'git rev-parse HEAD; touch /testbed/new.txt && echo tree-writable',
        `cat ${outside}/secret.txt 2>&1 || echo no-secret`,
        `ls ${future.reposDir} 2>&1 || echo no-repos`,
        'ls /root 2>&1 || echo no-root-home',
        'touch /usr/x 2>&1 || echo usr-read-only',
        `echo pwned > ${outside}/pwned 2>&1 || echo no-outside`,
        'echo mine > /tmp/polar-sandbox-marker && echo tmp-private',
        'echo "home=$HOME"; touch "$HOME/x" && echo home-writable',
      ].join('\n'),
    );
    const out = r.output;
    assert.match(out, new RegExp(`^${instance.base_commit}\ntree-writable$`, 'm'));
    for (const word of [
      'no-secret',
      'no-repos',
      'no-root-home',
      'usr-read-only',
      'no-outside',
      'tmp-private',
    ])
      assert.match(out, new RegExp(`^${word}$`, 'm'), out);
    assert.doesNotMatch(out, /host-secret-0001/);
    assert.match(out, /^home=\/home\/sandbox$/m);
    assert.match(out, /^home-writable$/m);
    assert.equal(existsSync(join(outside, 'pwned')), false, 'nothing written outside the tree');
    assert.equal(existsSync('/tmp/polar-sandbox-marker'), false, "the sandbox's /tmp is its own");
  });

  test('no network but the loopback: a host port is unreachable; the proxy is reached through the socket forwarder', async () => {
    let touched = 0;
    const other = createServer((s) => {
      touched++;
      s.end('other\n');
    });
    const otherPort = await listen(other);
    const proxy = createHttpServer((req, res) => res.end(`proxy-answer ${req.url}`));
    const proxyPort = await listen(proxy as unknown as Server);
    try {
      const direct = await env.exec(
        `(exec 3<>/dev/tcp/127.0.0.1/${otherPort} && echo CONNECTED) 2>&1 || echo REFUSED; ip -o link 2>/dev/null | wc -l`,
      );
      assert.match(direct.output, /REFUSED/);
      assert.doesNotMatch(direct.output, /CONNECTED/);
      const script = [
        `fetch('http://127.0.0.1:${proxyPort}/v1/models').then((r) => r.text()).then((t) => console.log(t))`,
        `.then(() => fetch('http://127.0.0.1:${otherPort}/')).then(() => console.log('OTHER-REACHED'), (e) => console.log('OTHER-REFUSED', e.cause?.code))`,
      ].join('');
      const output = await runAsHarness(env, [process.execPath, '-e', script], proxyPort);
      assert.match(output, /proxy-answer \/v1\/models/, output);
      assert.match(output, /OTHER-REFUSED ECONNREFUSED/, output);
      assert.equal(touched, 0, 'the other host port saw no connection');
    } finally {
      other.close();
      proxy.close();
    }
  });

  test('unsafe opt-ins: --network-allow forwards one host port; --network host shares the host network', async () => {
    const allowed = createServer((sock) => sock.end('allowed-answer\n'));
    const allowedPort = await listen(allowed);
    const proxy = createServer((sock) => sock.end('proxy\n'));
    const proxyPort = await listen(proxy);
    const connect = (port: number) =>
      `(exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3) 2>&1 || echo REFUSED-${port}`;
    try {
      for (const network of ['none', 'host'] as const) {
        const rt = new SandboxRuntime({
          reposDir: future.reposDir,
          network,
          ...(network === 'none' ? { allow: [{ host: '127.0.0.1', port: allowedPort }] } : {}),
        });
        const e = await rt.prepare(instance, 'agent');
        try {
          const output = await runAsHarness(e, ['bash', '-c', connect(allowedPort)], proxyPort);
          assert.match(output, /allowed-answer/, `${network}: ${output}`);
        } finally {
          await e.dispose();
        }
      }
    } finally {
      allowed.close();
      proxy.close();
    }
  });

  test('no future history: the hunt finds nothing, and --repos is not there', async () => {
    const r = await env.exec(hunterScript(future.fixSha, future.reposDir));
    assert.doesNotMatch(r.output, /FUTURE-FIX|dangling future commit|v9\.9\.9|future-work/, r.output);
    assert.match(r.output, /== cat-file\n(fatal|error): /);
    assert.match(r.output, /== repos\nls: cannot access/);
  });

  test('the process tree ends with the command: a background process does not outlive it', async () => {
    const tag = `polar-orphan-${process.pid}-${Date.now()}`;
    const r = await env.exec(`(exec -a ${tag} sleep 300) & disown; echo started`, { timeoutMs: 30_000 });
    assert.match(r.output, /started/);
    await new Promise((done) => setTimeout(done, 300));
    const ps = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
    assert.ok(!ps.includes(tag), 'the background sleep died with the sandbox');
  });

  test('limits: memory, a fork bomb and file size are bounded, and each is classified as what it is', async () => {
    const memory = await env.exec('python3 -c "x = bytearray(1 << 30)" 2>&1; echo "exit $?"', {
      timeoutMs: 60_000,
    });
    assert.match(memory.output, /MemoryError/);
    assert.equal(
      classifyEnd({ status: 'error', exitCode: 1, signal: null, output: memory.output }),
      'agent_oom',
    );
    // the bomb in the background; then only shell builtins (no fork left): count the processes, show an error
    const bomb = await env.exec(
      [
        "bash -c ':(){ :|:& };:' >/dev/null 2>/tmp/bomb.err &",
        'sleep 5',
        'n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo "processes $n"',
        'read -r line < /tmp/bomb.err; echo "$line"; echo bomb-over',
      ].join('\n'),
      { timeoutMs: 120_000 },
    );
    assert.match(bomb.output, /Resource temporarily unavailable/, bomb.output);
    assert.match(bomb.output, /bomb-over/, 'the command ended');
    const count = Number(/processes (\d+)/.exec(bomb.output)?.[1]);
    assert.ok(count > 10 && count <= 96 + 2, `bounded by the pids limit: ${count}`);
    assert.equal(
      classifyEnd({ status: 'error', exitCode: 254, signal: null, output: bomb.output }),
      'agent_pids',
    );
    const big = await env.exec('head -c 20000000 /dev/zero > big.bin; echo "exit $?"; rm -f big.bin');
    assert.match(big.output, /exit 153/, 'SIGXFSZ: 128 + 25');
    assert.equal(classifyEnd({ status: 'error', exitCode: 153, signal: null, output: '' }), 'agent_disk');
    // the machine is fine: a new command runs
    assert.match((await env.exec('echo alive')).output, /alive/);
  });

  test('four sandboxes at once, each with its own tree, home and harness folder', async () => {
    const envs = await Promise.all([0, 1, 2, 3].map(() => runtime.prepare(instance, 'agent')));
    try {
      const runs = await Promise.all(
        envs.map((e, i) =>
          e.exec(`echo ${i} > mine.txt; sleep 1; ls /testbed | grep -c mine; cat mine.txt; echo $HOME`),
        ),
      );
      for (const [i, r] of runs.entries())
        assert.match(r.output, new RegExp(`^1\n${i}\n/home/sandbox`), r.output);
      assert.equal(new Set(envs.map((e) => e.harnessDirBase)).size, 4, 'a harness folder per environment');
      // one environment cannot reach another's folder
      const peek = await envs[0]!.exec(`ls ${envs[1]!.harnessDirBase} 2>&1 || echo hidden`);
      assert.match(peek.output, /hidden/);
    } finally {
      await Promise.all(envs.map((e) => e.dispose()));
    }
  });

  test('the grading environment gets the test patch; the agent environment never sees it', async () => {
    const grade = await runtime.prepare(instance, 'grade');
    try {
      await grade.writeFile(`${grade.scratch}/polar-test.diff`, instance.test_patch);
      assert.match((await grade.exec(`cat ${grade.scratch}/polar-test.diff`)).output, /diff --git/);
      const agent = await env.exec(
        `ls ${env.scratch}; grep -rl "chunk" /polar 2>/dev/null | head -1; echo end`,
      );
      assert.doesNotMatch(agent.output, /polar-test\.diff/);
    } finally {
      await grade.dispose();
    }
  });
});
