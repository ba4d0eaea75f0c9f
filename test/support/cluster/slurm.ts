/**
 * A real Slurm cluster (Debian's slurm-wlm 22.05 and munge, installed by .ci/run) on TestNet hosts:
 * slurmctld on node 1, one slurmd on each of the other nodes, munged for them all; everything in a
 * temporary folder of the test's own, started by hand in the foreground (no systemd) and stopped by pid.
 *
 * What the daemons need on a machine without systemd (found running them here, issue 26):
 * - ProctrackType=proctrack/linuxproc and TaskPlugin=task/none: no cgroup controllers for jobs;
 * - a cgroup.conf naming the v1 plugin with nothing constrained, so slurmd never asks for a mounted
 *   cgroup v2 controller (Slurm's default, autodetect, fails where only a v2 hierarchy without the
 *   needed controllers is mounted);
 * - one SlurmdSpoolDir per node (%n) and a NodeAddr per node, each slurmd started with -N NAME;
 * - SlurmctldHost = this machine's hostname (slurmctld refuses to run under another name), at node 1's
 *   address; SlurmdParameters=config_overrides, so a node may declare CPUs the machine does not have;
 * - munged with its own key, socket, pid, seed and log files (AuthInfo=socket=...), --force as root.
 * Each daemon listens in its own network namespace: Slurm's default ports (6817, 6818) are free there
 * by construction, so nothing here can clash with another user's Slurm on this machine.
 * No slurmdbd, no database: polar follows its jobs with squeue and their own exit files (src/rollout/executors/slurm.ts).
 * useSlurmCluster is the two-node cluster the Slurm end-to-end files share, SHARD_PER_NODE the flags that
 * give each of its nodes one shard.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { chmodSync, createWriteStream, mkdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { useTestCluster } from './eval.ts';
import { netnsUnavailable, type TestNet, type TestNode } from './netns.ts';

const BINARIES = ['munged', 'slurmctld', 'slurmd', 'sbatch', 'squeue', 'srun', 'scontrol', 'sinfo'];

/** Why Slurm cannot run here (null: it can). */
export function slurmUnavailable(): string | null {
  const net = netnsUnavailable();
  if (net) return net;
  const missing = BINARIES.filter((b) => spawnSync('sh', ['-c', `command -v ${b}`]).status !== 0);
  return missing.length
    ? `needs ${missing.join(', ')} (apt-get install slurm-wlm munge; .ci/run does)`
    : null;
}

export interface SlurmCluster {
  dir: string;
  conf: string;
  /** the environment of a Slurm client (sbatch, squeue) and of polar --cluster slurm */
  env: NodeJS.ProcessEnv;
  controller: TestNode;
  /** compute nodes: Slurm name and test host */
  nodes: Array<{ name: string; host: TestNode }>;
  /** node CPUs as declared */
  cpus: number;
}

/** Runs a Slurm client with the cluster's configuration; its output, or a thrown error with stderr. */
export function slurmCli(c: SlurmCluster, argv: string[]): string {
  const r = spawnSync(argv[0]!, argv.slice(1), { env: c.env, encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`${argv.join(' ')}: exit ${r.status}: ${r.stderr}`);
  return r.stdout;
}

function config(
  dir: string,
  controller: TestNode,
  nodes: SlurmCluster['nodes'],
  cpus: number,
  memoryMb: number,
): string {
  const host = hostname().split('.')[0]!;
  return `${[
    'ClusterName=polartest',
    `SlurmctldHost=${host}(${controller.ip})`,
    'SlurmctldPort=6817',
    'SlurmdPort=6818',
    'AuthType=auth/munge',
    'CredType=cred/munge',
    `AuthInfo=socket=${join(dir, 'munge', 'socket')}`,
    'SlurmUser=root',
    'SlurmdUser=root',
    `StateSaveLocation=${join(dir, 'state')}`,
    `SlurmdSpoolDir=${join(dir, 'spool')}/%n`,
    `SlurmctldPidFile=${join(dir, 'slurmctld.pid')}`,
    `SlurmdPidFile=${join(dir, 'spool')}/%n.pid`,
    `SlurmctldLogFile=${join(dir, 'log', 'slurmctld.log')}`,
    `SlurmdLogFile=${join(dir, 'log')}/slurmd-%n.log`,
    'ProctrackType=proctrack/linuxproc',
    'TaskPlugin=task/none',
    'JobAcctGatherType=jobacct_gather/none',
    'AccountingStorageType=accounting_storage/none',
    'JobCompType=jobcomp/none',
    'MpiDefault=none',
    'SwitchType=switch/none',
    'SchedulerType=sched/builtin',
    'SelectType=select/cons_tres',
    'SelectTypeParameters=CR_CPU_Memory',
    'SlurmdParameters=config_overrides',
    'ReturnToService=2',
    // a job's state stays in squeue -t all this long after it ends (polar reads it, and exit files)
    'MinJobAge=300',
    // a node lost is noticed in seconds, and a job it held is requeued
    'SlurmdTimeout=10',
    ...nodes.map(
      (n) => `NodeName=${n.name} NodeAddr=${n.host.ip} CPUs=${cpus} RealMemory=${memoryMb} State=UNKNOWN`,
    ),
    `PartitionName=polar Nodes=${nodes.map((n) => n.name).join(',')} Default=YES MaxTime=INFINITE State=UP`,
  ].join('\n')}\n`;
}

const CGROUP_CONF = `${[
  'CgroupPlugin=cgroup/v1',
  'IgnoreSystemd=yes',
  'CgroupAutomount=no',
  'ConstrainCores=no',
  'ConstrainRAMSpace=no',
  'ConstrainDevices=no',
].join('\n')}\n`;

function daemon(argv: string[], logFile: string, env: NodeJS.ProcessEnv): ChildProcess {
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(argv[0]!, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.pipe(log, { end: false });
  child.stderr?.pipe(log, { end: false });
  return child;
}

/**
 * Starts munged (this namespace, a Unix socket in `dir`), slurmctld on net's node 1 and a slurmd on each
 * of the next `nodes` hosts; resolves when every node is idle. Every process is the net's to kill (by pid).
 */
export async function startSlurm(
  net: TestNet,
  dir: string,
  { nodes = 2, cpus = 2, memoryMb = 4000, timeoutMs = 60_000 } = {},
): Promise<SlurmCluster> {
  const [controller, ...rest] = net.nodes;
  if (!controller || rest.length < nodes) throw new Error(`startSlurm needs ${nodes + 1} test hosts`);
  const compute = rest.slice(0, nodes).map((host, k) => ({ name: `n${k + 1}`, host }));
  for (const sub of ['munge', 'state', 'log', ...compute.map((n) => `spool/${n.name}`)])
    mkdirSync(join(dir, sub), { recursive: true });
  chmodSync(join(dir, 'munge'), 0o700);
  const key = join(dir, 'munge', 'munge.key');
  writeFileSync(key, randomFillSync(Buffer.alloc(1024)), { mode: 0o400 });
  const conf = join(dir, 'slurm.conf');
  writeFileSync(conf, config(dir, controller, compute, cpus, memoryMb));
  writeFileSync(join(dir, 'cgroup.conf'), CGROUP_CONF);
  const env: NodeJS.ProcessEnv = { ...process.env, SLURM_CONF: conf };
  const cluster: SlurmCluster = { dir, conf, env, controller, nodes: compute, cpus };

  const munge = join(dir, 'munge');
  net.children.push(
    daemon(
      [
        'munged',
        '--foreground',
        '--force',
        `--socket=${join(munge, 'socket')}`,
        `--key-file=${key}`,
        `--pid-file=${join(munge, 'munged.pid')}`,
        `--seed-file=${join(munge, 'munged.seed')}`,
        `--log-file=${join(munge, 'munged.log')}`,
      ],
      join(dir, 'log', 'munged.out'),
      env,
    ),
  );
  const deadline = Date.now() + timeoutMs;
  await until(
    deadline,
    () => spawnSync('sh', ['-c', `test -S ${join(munge, 'socket')}`]).status === 0,
    'munged',
  );
  net.spawn(controller, ['slurmctld', '-D', '-i', '-f', conf], {
    env,
    logFile: join(dir, 'log', 'slurmctld.out'),
  });
  await until(
    deadline,
    () => spawnSync('scontrol', ['ping'], { env, encoding: 'utf8' }).stdout?.includes('is UP'),
    'slurmctld',
  );
  for (const n of compute)
    net.spawn(n.host, ['slurmd', '-D', '-N', n.name, '-f', conf], {
      env,
      logFile: join(dir, 'log', `slurmd-${n.name}.out`),
    });
  await until(
    deadline,
    () => {
      const states = spawnSync('sinfo', ['-h', '-N', '-o', '%N %T'], { env, encoding: 'utf8' }).stdout ?? '';
      return compute.every((n) => new RegExp(`^${n.name} idle`, 'm').test(states));
    },
    'slurmd nodes idle',
  );
  return cluster;
}

async function until(deadline: number, ready: () => boolean | undefined, what: string): Promise<void> {
  while (Date.now() < deadline) {
    if (ready()) return;
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error(`slurm test cluster: ${what} not ready in time`);
}

/** The hooks of a describe on a cluster of two compute nodes of 2 CPUs each (useTestCluster, startSlurm). */
export function useSlurmCluster(prefix: string): { net: TestNet; tmp: string; slurm: SlurmCluster } {
  return useTestCluster(prefix, 'slurm', (net, dir) => startSlurm(net, dir, { nodes: 2, cpus: 2 }));
}

/**
 * `--cluster slurm` on useSlurmCluster's nodes: two shards, each asking a whole node (its 2 CPUs) and
 * running one sample at a time, so one shard runs on each node.
 */
export const SHARD_PER_NODE = [
  '--cluster',
  'slurm',
  '--cluster-shards',
  '2',
  '--cluster-cpus',
  '2',
  '--concurrency',
  '1',
];
