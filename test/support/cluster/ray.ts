/**
 * A real Ray cluster (the pinned ray of `npm run setup`) on TestNet hosts: node 1 is the head (no
 * polar_slot, so no sample runs there), the others are workers with `slots` polar_slot each. Started one
 * node at a time: on a loaded 2-core machine a worker whose dashboard agent starts slowly makes its raylet
 * give up waiting (Ray 2.58 waits a fixed time for the agent's port file), so nodes never start together.
 * Flags as the issue found them needed: --node-ip-address, --memory, --num-cpus, no dashboard, no usage
 * stats; fixed agent ports (each node has its own namespace, so they never clash). Stopped by pid only.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../cli.ts';
import { runOnCluster, useTestCluster } from './eval.ts';
import { netnsUnavailable, type TestNet, type TestNode } from './netns.ts';

export { ROOT };
export const VENV_PYTHON = join(ROOT, '.venv/bin/python');
const RAY = join(ROOT, '.venv/bin/ray');

/** Why Ray cannot run here (null: it can). */
export function rayUnavailable(): string | null {
  if (!existsSync(RAY)) return 'no .venv/bin/ray (npm run setup installs the cluster group)';
  return spawnSync(VENV_PYTHON, ['-c', 'import ray'], { stdio: 'ignore' }).status === 0
    ? null
    : 'ray does not import in .venv';
}

export const RAY_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  RAY_USAGE_STATS_ENABLED: '0',
  // a lost node is noticed in seconds, not the default half minute
  RAY_health_check_period_ms: '1000',
  RAY_health_check_timeout_ms: '1000',
  RAY_health_check_failure_threshold: '3',
};

export interface RayCluster {
  address: string;
  head: TestNode;
  workers: TestNode[];
  /** the polar_slot of each worker */
  slots: number;
}

const COMMON = [
  '--disable-usage-stats',
  '--include-log-monitor=false',
  '--object-store-memory=80000000',
  '--dashboard-agent-grpc-port=52366',
  '--dashboard-agent-listen-port=52365',
  '--runtime-env-agent-port=52367',
  '--metrics-export-port=52368',
  '--block',
];

async function started(logFile: string, deadline: number): Promise<void> {
  while (Date.now() < deadline) {
    const text = existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
    if (text.includes('Ray runtime started')) return;
    if (/Exception|Error:/.test(text) && !text.includes('Ray runtime started'))
      throw new Error(`ray start failed: ${text.split('\n').slice(-6).join('\n')}`);
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`ray start did not finish in time (${logFile})`);
}

/** Starts one Ray node in `n`'s namespace; a start that times out under load is tried again, afresh. */
async function startNode(net: TestNet, n: TestNode, dir: string, args: string[], deadline: number) {
  for (let attempt = 1; ; attempt++) {
    const temp = join(dir, `${n.ip.split('.').at(-1)}-${attempt}`);
    mkdirSync(temp, { recursive: true });
    const logFile = join(dir, `ray-${n.ip}-${attempt}.log`);
    const argv = [RAY, 'start', `--node-ip-address=${n.ip}`, `--temp-dir=${temp}`, ...args, ...COMMON];
    // a higher priority: the raylet gives up on a dashboard agent that starts slowly on a busy machine
    net.spawn(n, ['nice', '-n', '-10', ...argv], { env: RAY_ENV, logFile });
    try {
      return await started(logFile, deadline);
    } catch (error) {
      net.killNode(n);
      if (attempt >= 3 || Date.now() > deadline) throw error;
    }
  }
}

/** A worker with `slots` polar_slot joins the cluster (node `n`). */
export async function addWorker(
  net: TestNet,
  cluster: RayCluster,
  n: TestNode,
  dir: string,
  timeoutMs = 240_000,
) {
  await startNode(
    net,
    n,
    dir,
    [
      `--address=${cluster.address}`,
      `--num-cpus=${cluster.slots}`,
      '--memory=2000000000',
      `--resources={"polar_slot": ${cluster.slots}}`,
    ],
    Date.now() + timeoutMs,
  );
  cluster.workers.push(n);
}

/** Starts the head on node 1 and a worker on each of the next `workers` nodes (default: all of them). */
export async function startRay(
  net: TestNet,
  dir: string,
  { slots = 2, workers, timeoutMs = 240_000 }: { slots?: number; workers?: number; timeoutMs?: number } = {},
): Promise<RayCluster> {
  const [head, ...rest] = net.nodes;
  if (!head) throw new Error('no nodes');
  const cluster: RayCluster = { address: `${head.ip}:6379`, head, workers: [], slots };
  const args = ['--head', '--port=6379', '--num-cpus=0', '--memory=400000000', '--include-dashboard=false'];
  await startNode(net, head, dir, args, Date.now() + timeoutMs);
  for (const n of rest.slice(0, workers ?? rest.length)) await addWorker(net, cluster, n, dir, timeoutMs);
  return cluster;
}

/** `polar eval` on the head node; resolves with its exit code and output (killed after `limitMs`). */
export function evalOnHead(
  net: TestNet,
  ray: RayCluster,
  args: string[],
  limitMs = 420_000,
  onLine?: (line: string) => void,
): Promise<{ code: number | null; stderr: string }> {
  return polarOnHead(net, ray, ['eval', ...args], { limitMs, ...(onLine ? { onLine } : {}) });
}

/** `polar WORDS` on the head node (env: RAY_ENV unless given); its exit code and output (killed after `limitMs`). */
export function polarOnHead(
  net: TestNet,
  ray: RayCluster,
  words: string[],
  {
    limitMs = 420_000,
    onLine,
    env = RAY_ENV,
  }: { limitMs?: number; onLine?: (line: string) => void; env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number | null; stderr: string }> {
  const argv = ['ip', 'netns', 'exec', ray.head.name, process.execPath, join(ROOT, 'bin/polar'), ...words];
  return runOnCluster(net, argv, env, limitMs, onLine);
}

/** Why the Ray cluster tests cannot run here (null: they can). */
export const RAY_SKIP: string | null = netnsUnavailable() ?? rayUnavailable();

/**
 * The hooks of a describe that needs a Ray cluster (useTestCluster): a head and two workers with 2
 * polar_slot each on three test hosts. The returned object is filled in by `before`.
 */
export function useRayCluster(prefix: string): { net: TestNet; ray: RayCluster; tmp: string } {
  return useTestCluster(prefix, 'ray', (net, dir) => startRay(net, dir, { slots: 2 }));
}
