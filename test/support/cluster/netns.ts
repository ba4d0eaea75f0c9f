/**
 * Test hosts for the cluster tests: network namespaces on one bridge, each with its own address in a
 * 10.213.X.0/24 range this file makes (X free on this machine), loopback up, traffic only between them
 * and the bridge's address in the root namespace. Every process started in a namespace is killed by pid
 * (`ip netns pids`: exactly what runs there, nothing of another user's), then the namespaces and the
 * bridge are deleted: on `destroy()`, and on the test process's exit when a test failed before it.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';

export interface TestNode {
  name: string;
  ip: string;
  /** the interface name inside the namespace (GLOO_SOCKET_IFNAME) */
  ifname: string;
}

/** Why the namespace tests cannot run here (null: they can). */
export function netnsUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces)';
  if (spawnSync('ip', ['-V']).status !== 0) return 'needs iproute2 (ip)';
  return null;
}

const live = new Set<TestNet>();
const cleanUp = () => {
  for (const net of live) net.destroySync();
};
process.on('exit', cleanUp);
// the test runner stops a file that ran past its time with a signal: clean up, then die of it
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const)
  process.once(signal, () => {
    cleanUp();
    process.kill(process.pid, signal);
  });

export class TestNet {
  readonly nodes: TestNode[] = [];
  readonly children: ChildProcess[] = [];
  private constructor(
    readonly tag: string,
    readonly bridge: string,
    readonly subnet: string,
  ) {}

  get bridgeIp(): string {
    return `${this.subnet}.254`;
  }

  /** `count` namespaces named polar-<tag>-<k>, addresses SUBNET.1 .. SUBNET.count */
  static create(count: number): TestNet {
    const routes = execFileSync('ip', ['-4', 'route'], { encoding: 'utf8' });
    const taken = (x: number) => routes.includes(`10.213.${x}.`);
    let x = 20 + (process.pid % 200);
    for (let tries = 0; taken(x) && tries < 230; tries++) x = 20 + ((x - 19) % 230);
    const tag = `${process.pid.toString(36)}${Date.now().toString(36).slice(-3)}`;
    const net = new TestNet(tag, `plb${tag}`.slice(0, 15), `10.213.${x}`);
    live.add(net);
    const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
    ip('link', 'add', net.bridge, 'type', 'bridge');
    ip('addr', 'add', `${net.bridgeIp}/24`, 'dev', net.bridge);
    ip('link', 'set', net.bridge, 'up');
    for (let k = 1; k <= count; k++) {
      const name = `polar-${tag}-${k}`;
      const host = `plv${tag}${k}`.slice(0, 15);
      ip('netns', 'add', name);
      ip('link', 'add', host, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', name);
      ip('link', 'set', host, 'master', net.bridge, 'up');
      ip('-n', name, 'addr', 'add', `${net.subnet}.${k}/24`, 'dev', 'eth0');
      ip('-n', name, 'link', 'set', 'eth0', 'up');
      ip('-n', name, 'link', 'set', 'lo', 'up');
      net.nodes.push({ name, ip: `${net.subnet}.${k}`, ifname: 'eth0' });
    }
    return net;
  }

  /** Starts argv in node k's namespace; its output goes to `logFile`. */
  spawn(node: TestNode, argv: string[], options: { env?: NodeJS.ProcessEnv; logFile: string; cwd?: string }) {
    const log = createWriteStream(options.logFile, { flags: 'a' });
    const child = spawn('ip', ['netns', 'exec', node.name, ...argv], {
      env: options.env ?? process.env,
      cwd: options.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.pipe(log, { end: false });
    child.stderr?.pipe(log, { end: false });
    this.children.push(child);
    return child;
  }

  /** The pids running in node k's namespace. */
  pids(node: TestNode): number[] {
    const r = spawnSync('ip', ['netns', 'pids', node.name], { encoding: 'utf8' });
    return r.stdout
      .split('\n')
      .map((s) => Number(s.trim()))
      .filter((n) => n > 0);
  }

  /** Kills every process of node k's namespace (a node that dies), by pid, until none is left. */
  killNode(node: TestNode): void {
    for (let round = 0; round < 20; round++) {
      const pids = this.pids(node);
      if (pids.length === 0) return;
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
      spawnSync('sleep', ['0.1']);
    }
  }

  destroySync(): void {
    if (!live.has(this)) return;
    live.delete(this);
    for (const node of this.nodes) this.killNode(node);
    for (const child of this.children) if (child.exitCode === null) child.kill('SIGKILL');
    for (const node of this.nodes) spawnSync('ip', ['netns', 'del', node.name]);
    if (existsSync(`/sys/class/net/${this.bridge}`)) spawnSync('ip', ['link', 'del', this.bridge]);
  }

  async destroy(): Promise<void> {
    this.destroySync();
  }
}
