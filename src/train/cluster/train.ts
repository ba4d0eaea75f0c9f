/**
 * `polar loop --cluster slurm|ray --train-nodes N`: a step's training is one `polar train` across N nodes,
 * started through the launchers `polar train --nnodes` already has (src/train/worker/polar_train/cluster):
 *   slurm  srun --nodes=N --ntasks-per-node=1 python -m polar_train.cluster.srun_torchrun -- TRAIN ARGS
 *          (a job of its own from a login node; a step of the allocation inside one: salloc, sbatch)
 *   ray    python -m polar_train.cluster.ray_torchrun --address A --nnodes N -- TRAIN ARGS
 *          (one STRICT_SPREAD bundle per node)
 * TRAIN ARGS are the request the loop would give runTrain (src/train/launch.ts) as polar train's flags: the
 * step's trajectories, its train/ folder, --resume-from the previous step's, the options, and the loop's
 * --allow-zero-advantage and --sampled-by. Each node's polar train writes into the same train/ folder (a
 * path every node sees): global rank 0 writes the checkpoints, metrics.jsonl and `latest`, so the loop reads
 * the step's checkpoint and its step metrics (for --report-to) back from there, as a local run leaves them.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { execa } from 'execa';
import { EnvironmentError, PolarError, UsageError } from '../../errors.ts';
import type { ClusterChoice } from '../../options/parsers.ts';
import { throwIfStopped } from '../../util/interrupt.ts';
import { parseJsonLine, splitLines } from '../../util/jsonl.ts';
import { log } from '../../util/log.ts';
import { findPython } from '../env.ts';
import type { TrainRequest } from '../launch.ts';
import { optionsToFlags, type TrainKey } from '../options.ts';
import { CHECKPOINT_FILES } from '../schema.ts';
import { polarCommand } from './polar.ts';
import { rayPython, workerEnv } from './python.ts';

/** Where a loop step trains when it is not this machine. */
export interface NodesTraining {
  engine: ClusterChoice['engine'];
  /** ray: the cluster's address (default RAY_ADDRESS, else auto) */
  address?: string;
  nodes: number;
  /** how each node starts polar (--cluster-polar, else this node binary and bin/polar) */
  polar: string[];
}

/** The loop's --train-nodes with its --cluster; null: the step trains on this machine (runTrain). */
export function nodesTraining(
  choice: ClusterChoice | undefined,
  nodes: number,
  clusterPolar?: string,
): NodesTraining | null {
  if (nodes <= 1) return null;
  if (!choice)
    throw new UsageError(
      `--train-nodes ${nodes} needs --cluster: the nodes are Slurm's (srun) or Ray's (a placement group)`,
      'add --cluster slurm or --cluster ray=HOST:PORT, or leave --train-nodes at 1 to train on this machine',
    );
  return {
    engine: choice.engine,
    ...(choice.address ? { address: choice.address } : {}),
    nodes,
    polar: polarCommand(clusterPolar),
  };
}

/** polar train's words for `req` (after `polar train`); every path absolute, as each node reads it. */
export function trainWords(req: TrainRequest, quiet: boolean): string[] {
  const flags = { ...req.flags } as Partial<Record<TrainKey, unknown>>;
  if (typeof flags.model === 'string' && existsSync(flags.model)) flags.model = resolve(flags.model);
  return [
    resolve(req.trajectories),
    '--out',
    resolve(req.out),
    ...(req.resume ? ['--resume-from', resolve(req.resume)] : []),
    ...(req.configFile ? ['--config', resolve(req.configFile)] : []),
    ...optionsToFlags(flags),
    ...(req.allowZeroAdvantage ? ['--allow-zero-advantage'] : []),
    ...(req.sampledBy ?? []).flatMap((m) => ['--sampled-by', m]),
    ...(quiet ? ['--quiet'] : []),
  ];
}

/** What a node asks of its engine: the trainer's processes (CPU: --nproc of them; CUDA: --gpus GPUs). */
export interface NodeShare {
  device: 'cpu' | 'cuda';
  processes: number;
}

/** The launcher's command line: [python, ...args]. */
export function launcherArgv(t: NodesTraining, python: string, share: NodeShare, words: string[]): string[] {
  const polar = ['--polar', t.polar.map(shellWord).join(' ')];
  if (t.engine === 'slurm')
    return [
      'srun',
      `--nodes=${t.nodes}`,
      '--ntasks-per-node=1',
      // a node's polar train starts its own processes (torchrun): its task holds their CPUs or GPUs
      ...(share.device === 'cuda'
        ? [`--gpus-per-node=${share.processes}`]
        : [`--cpus-per-task=${share.processes}`]),
      '--kill-on-bad-exit=1',
      `--chdir=${process.cwd()}`,
      python,
      '-m',
      'polar_train.cluster.srun_torchrun',
      ...polar,
      '--',
      ...words,
    ];
  return [
    python,
    '-m',
    'polar_train.cluster.ray_torchrun',
    '--address',
    t.address ?? process.env.RAY_ADDRESS ?? 'auto',
    '--nnodes',
    String(t.nodes),
    '--cpus',
    String(share.device === 'cpu' ? share.processes : 1),
    ...(share.device === 'cuda' ? ['--gpus', String(share.processes)] : []),
    ...polar,
    '--cwd',
    process.cwd(),
    '--',
    ...words,
  ];
}

/** A word of --polar (split by shlex on the node's side): quoted when it holds a space or a quote. */
function shellWord(w: string): string {
  return /^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", "'\\''")}'`;
}

/**
 * A loop step's `polar train` across the nodes: the launcher as a child, its output the loop's (the
 * nodes' progress), then the checkpoint the run left in `latest` and its step metrics (req.onStep).
 */
export async function trainAcrossNodes(
  t: NodesTraining,
  req: TrainRequest,
  share: NodeShare,
): Promise<{ checkpoint: string | null }> {
  const out = resolve(req.out);
  const python =
    t.engine === 'ray'
      ? (await rayPython(req.python)).python
      : (await findPython(req.python ?? process.env.POLAR_PYTHON)).python;
  const [file, ...args] = launcherArgv(t, python, share, trainWords(req, log.quiet));
  log.info(
    `training on ${t.nodes} ${t.engine === 'slurm' ? 'Slurm' : 'Ray'} nodes (${t.engine === 'slurm' ? 'srun' : 'ray_torchrun'}): polar train --out ${out}`,
  );
  const child = execa(file!, args, {
    reject: false,
    stdin: 'ignore',
    env: workerEnv(),
    // the nodes' progress (srun: each node's polar train; ray_torchrun: its nodes' ends) is the loop's, on
    // stderr; stdout is kept (ray_torchrun: one JSON event a line), not printed: the loop's stdout is its own
    stdout: 'pipe',
    stderr: ['inherit', 'pipe'],
    buffer: { stdout: true, stderr: true },
  });
  const onAbort = () => child.kill('SIGTERM');
  req.signal?.addEventListener('abort', onAbort, { once: true });
  let result: Awaited<typeof child>;
  try {
    result = await child;
  } finally {
    req.signal?.removeEventListener('abort', onAbort);
  }
  throwIfStopped(
    req.signal,
    `the training across nodes in ${out} was stopped`,
    'run the same command with --resume to continue (an unfinished step is redone)',
  );
  if ((result as { code?: string }).code === 'ENOENT')
    throw new EnvironmentError(
      `--train-nodes with --cluster ${t.engine}: ${file} not found`,
      'run polar on a Slurm login node or inside an allocation (srun on PATH)',
    );
  if (result.exitCode !== 0) throw launcherFailure(t, out, result);
  if (t.engine === 'ray') {
    const placed = rayEvents(result.stdout).find((e) => e.event === 'nodes') as
      | { nodes?: Array<{ rank: number; ip: string }> }
      | undefined;
    if (placed?.nodes)
      log.info(`trained on the Ray nodes ${placed.nodes.map((n) => `${n.ip} (node ${n.rank})`).join(', ')}`);
  }
  const latest = join(out, CHECKPOINT_FILES.latest);
  const checkpoint = existsSync(latest) ? join(out, readFileSync(latest, 'utf8').trim()) : null;
  const metrics = join(out, CHECKPOINT_FILES.metrics);
  if (req.onStep && existsSync(metrics))
    for (const line of splitLines(readFileSync(metrics, 'utf8'))) {
      const event = parseJsonLine(metrics, line) as Record<string, unknown>;
      if (event.event === 'step') req.onStep(event);
    }
  return { checkpoint };
}

/** The launcher failed: its last words (Ray: each node's exit and the end of its stderr) and the logs. */
function launcherFailure(
  t: NodesTraining,
  out: string,
  result: { exitCode?: number | undefined; signal?: string | undefined; stdout?: unknown; stderr?: unknown },
): PolarError {
  const lines = (text: unknown) =>
    String(text ?? '')
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
  let said = lines(result.stderr).slice(-3).join(' | ');
  if (t.engine === 'ray') {
    const told = rayEvents(result.stdout)
      .filter((e) => e.event === 'error' || (e.event === 'node' && e.exit_code !== 0))
      .map((e) =>
        e.event === 'error'
          ? `${e.kind}: ${e.message}`
          : `node ${e.rank} (${e.ip}) exit ${e.exit_code}: ${lines(e.stderr_tail).slice(-2).join(' | ')}`,
      );
    if (told.length) said = told.join('; ');
  }
  return new PolarError(
    `the training across ${t.nodes} nodes (${t.engine}) ended with ${result.signal ?? `exit ${result.exitCode}`}: ${said || 'no output'}`,
    {
      hint: `each node's log is in ${out} (worker.log, worker-nodeR.log); the step is redone by --resume`,
    },
  );
}

/** ray_torchrun's events: its JSON lines on stdout (src/train/worker/polar_train/cluster/ray_torchrun.py). */
function rayEvents(stdout: unknown): Array<Record<string, unknown>> {
  const events: Array<Record<string, unknown>> = [];
  for (const line of String(stdout ?? '').split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      events.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // a line of Ray's own that looks like JSON: not an event
    }
  }
  return events;
}
