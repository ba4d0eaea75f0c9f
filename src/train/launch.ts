/**
 * `polar train`: resolves the config, validates the trajectories (before any GPU time is spent), checks
 * the Python environment, writes <out>/config.json, launches the PyTorch worker (python -m polar_train, or
 * torchrun for --gpus N > 1) with execa, and turns its JSON-lines events into progress and typed errors.
 */
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { InputError, UsageError, unreadableInput } from '../errors.ts';
import { InterruptedError, stopSignalOf } from '../util/interrupt.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import {
  type ResolvedTrainConfig,
  readUserConfig,
  resolveTrainConfig,
  type UserTrainConfig,
} from './config.ts';
import {
  checkDevice,
  checkPackages,
  findPython,
  type Prober,
  type PythonDevices,
  type PythonPackages,
  probePython,
} from './env.ts';
import { checkModelFound, modelVocabSize, otherSamplers } from './model-info.ts';
import type { TrainOptions } from './options.ts';
import { TrainProgress } from './progress.ts';
import { CHECKPOINT_FILES } from './schema.ts';
import { checkTrajectories, type TrajectorySummary, trajectoryCheck } from './trajectories.ts';
import { runWorker, type WorkerCommand, type WorkerOutcome, workerError } from './worker-process.ts';

/** The Python package lives beside this file: src/train/worker/polar_train. */
export const WORKER_DIR = fileURLToPath(new URL('./worker', import.meta.url));

/**
 * One node of a training run across nodes (`polar train --nnodes N --node-rank R --rdzv-endpoint H:P`):
 * torchrun's c10d rendezvous, hosted by node 0 (`--rdzv-conf=is_host=1`: on a machine whose hostname
 * resolves to another address than the endpoint's, torchrun would otherwise host the store nowhere),
 * each node's own address (`--local-addr`) and the interface gloo/NCCL talk over.
 */
export interface NodeRole {
  nnodes: number;
  nodeRank: number;
  /** HOST:PORT of node 0's rendezvous store */
  rdzvEndpoint: string;
  /** this node's address the others reach */
  localAddr?: string;
  /** GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME */
  socketIfname?: string;
  /** the run's id, the same on every node (default: derived from the endpoint) */
  rdzvId?: string;
}

/** torchrun's arguments for one node of a multi-node run. */
export function nodeArgs(role: NodeRole, processes: number): string[] {
  return [
    `--nnodes=${role.nnodes}`,
    `--node-rank=${role.nodeRank}`,
    `--nproc_per_node=${processes}`,
    '--rdzv-backend=c10d',
    `--rdzv-endpoint=${role.rdzvEndpoint}`,
    `--rdzv-id=${role.rdzvId ?? `polar-${role.rdzvEndpoint.replace(/[^\w]/g, '-')}`}`,
    ...(role.nodeRank === 0 ? ['--rdzv-conf=is_host=1'] : ['--rdzv-conf=is_host=0']),
    ...(role.localAddr ? [`--local-addr=${role.localAddr}`] : []),
  ];
}

/**
 * python -m polar_train --config FILE, or the same under torchrun (FSDP data parallel) for more than one
 * process: `processes` is --gpus on CUDA, --nproc on the CPU (gloo), per node with `nodes`.
 */
export function workerCommand(options: {
  python: string;
  configPath: string;
  processes: number;
  workerDir?: string;
  pythonPath?: string | undefined;
  nodes?: NodeRole | undefined;
}): WorkerCommand {
  const dir = options.workerDir ?? WORKER_DIR;
  const env = {
    PYTHONPATH: options.pythonPath ? `${dir}:${options.pythonPath}` : dir,
    PYTHONUNBUFFERED: '1',
    PYTHONDONTWRITEBYTECODE: '1',
  };
  const worker = ['-m', 'polar_train', '--config', options.configPath];
  const role = options.nodes;
  if (role && role.nnodes > 1) {
    const socket: Record<string, string> = role.socketIfname
      ? { GLOO_SOCKET_IFNAME: role.socketIfname, NCCL_SOCKET_IFNAME: role.socketIfname }
      : {};
    return {
      file: options.python,
      args: ['-m', 'torch.distributed.run', ...nodeArgs(role, options.processes), ...worker],
      env: { ...env, ...socket },
    };
  }
  if (options.processes <= 1) return { file: options.python, args: worker, env };
  return {
    file: options.python,
    args: [
      '-m',
      'torch.distributed.run',
      '--standalone',
      '--nnodes=1',
      `--nproc_per_node=${options.processes}`,
      ...worker,
    ],
    env,
  };
}

/** config.json's `environment`: the Python and package versions, and the CUDA devices the worker saw. */
function environmentRecord(
  probe: PythonPackages,
  devices?: { cuda_devices: number },
): Record<string, unknown> {
  return {
    python: probe.executable,
    torch: probe.torch,
    transformers: probe.transformers,
    peft: probe.peft,
    safetensors: probe.safetensors,
    ...(devices ? { cuda_devices: devices.cuda_devices } : {}),
  };
}

export interface TrainRequest {
  trajectories: string;
  out: string;
  resume?: string | undefined;
  configFile?: string | undefined;
  /** train.json keys already read (polar train --config: the keys without a flag), when no configFile */
  config?: UserTrainConfig | undefined;
  flags: Partial<Record<keyof TrainOptions, unknown>>;
  python?: string | undefined;
  json?: boolean;
  /** train even when every advantage is 0 (polar loop: a step whose rollouts all scored alike) */
  allowZeroAdvantage?: boolean;
  /** SIGINT / SIGTERM (src/util/interrupt.ts): the worker is stopped, the last checkpoint kept for --resume */
  signal?: AbortSignal;
  /** model names that serve the trained weights (polar loop: its served model), beside the model itself */
  sampledBy?: string[];
  /** this machine's part of a run across nodes (torchrun's rendezvous) */
  nodes?: NodeRole;
  /** each `step` event of the worker (one line of metrics.jsonl): --report-to's tracking writer */
  onStep?: (event: Record<string, unknown>) => void;
}

export interface TrainResult {
  config: ResolvedTrainConfig;
  configPath: string;
  metricsPath: string;
  checkpoint: string | null;
  steps: number;
  data: TrajectorySummary;
}

export interface TrainDeps {
  probe?: Prober;
  /** where `-` reads from (default: process.stdin) */
  stdin?: NodeJS.ReadableStream;
  progress?: TrainProgress;
}

/** The checkpoint a --resume directory points at (its own step dir, or the one named by its latest file). */
async function checkpointMeta(dir: string): Promise<{ base_model?: string; dir: string }> {
  // a checkpoint that is not there is missing input, as a missing trajectory file is (exit 3)
  if (!existsSync(dir)) throw unreadableInput(dir, { code: 'ENOENT' }, { what: '--resume' });
  let step = dir;
  if (!existsSync(join(dir, CHECKPOINT_FILES.state)) && existsSync(join(dir, CHECKPOINT_FILES.latest))) {
    step = join(dir, (await readFile(join(dir, CHECKPOINT_FILES.latest), 'utf8')).trim());
  }
  const metaPath = join(step, CHECKPOINT_FILES.meta);
  if (!existsSync(join(step, CHECKPOINT_FILES.state)) || !existsSync(metaPath)) {
    throw new UsageError(
      `--resume ${dir}: not a polar checkpoint (no latest file and no trainer_state.pt)`,
      'pass the --out directory of an earlier run, or one of its step-N directories',
    );
  }
  return { ...JSON.parse(await readFile(metaPath, 'utf8')), dir: step };
}

/** `polar build ... | polar train -`: the worker reads a file, so stdin is kept in the run directory. */
async function spoolStdin(req: TrainRequest, deps: TrainDeps): Promise<string> {
  await mkdir(resolve(req.out), { recursive: true });
  const spooled = join(resolve(req.out), 'trajectories.jsonl');
  // a stop signal while the writer upstream is still going ends the wait (nothing has trained yet)
  try {
    await pipeline(
      deps.stdin ?? process.stdin,
      createWriteStream(spooled),
      ...(req.signal ? [{ signal: req.signal }] : []),
    );
  } catch (error) {
    if (req.signal?.aborted)
      throw new InterruptedError(
        stopSignalOf(req.signal),
        'stopped while reading the trajectories from stdin; nothing was trained',
        'run the same command again',
      );
    throw error;
  }
  return spooled;
}

export async function runTrain(req: TrainRequest, deps: TrainDeps = {}): Promise<TrainResult> {
  if (req.trajectories === '-') req = { ...req, trajectories: await spoolStdin(req, deps) };
  const file = req.configFile ? await readUserConfig(req.configFile) : req.config;
  const resume = req.resume ? resolve(req.resume) : undefined;
  // one run per --out: a new run would overwrite its checkpoints and append to its metrics
  if (!resume && existsSync(join(resolve(req.out), CHECKPOINT_FILES.latest)))
    throw new UsageError(
      `--out ${req.out} already holds a training run (a latest checkpoint)`,
      'add --resume to continue it, or give a new --out',
    );
  const flags = { ...req.flags };
  if (typeof flags.model === 'string' && existsSync(flags.model)) flags.model = resolve(flags.model);
  const config = resolveTrainConfig({
    trajectories: resolve(req.trajectories),
    out: resolve(req.out),
    resume,
    file,
    flags,
    configFile: req.configFile ? { path: req.configFile, flag: '--config' } : undefined,
    nodes: req.nodes ? { count: req.nodes.nnodes, flag: '--nnodes' } : undefined,
  });
  const resumed = resume ? await checkpointMeta(resume) : undefined;

  // 1. the model (a folder of weights, not an ONNX export), then the data, before any GPU time is spent:
  // every id within the model's vocabulary when it is known
  if (!resumed) checkModelFound(config.model, '--model');
  const trained = resumed?.dir ?? config.model;
  const vocab = modelVocabSize(trained);
  const data = await checkTrajectories(config.trajectories, trajectoryCheck(config, vocab, trained));
  if (data.learnable === 0 && !req.allowZeroAdvantage) throw zeroAdvantage(config.trajectories, data);
  const others = otherSamplers(data.models, trained, req.sampledBy);
  if (others.length > 0)
    log.warn(
      `${req.trajectories} was sampled from ${others.slice(0, 3).join(', ')}, training starts from ${trained}: the first batch's logprobs are compared (sampling check)`,
    );
  if (config.loss_agg === 'dr-grpo' && config.loss_norm_tokens === null) {
    config.loss_norm_tokens = Math.max(1, data.maxTrainedPerRollout);
  }
  log.debug(`trajectories: ${JSON.stringify(data)}`);

  // 2. the environment: the packages now (no torch import), the devices when the worker reports them
  const probe: PythonPackages = await findPython(
    req.python ?? process.env.POLAR_PYTHON,
    deps.probe ?? probePython,
  );
  const needs = { device: config.device, gpus: config.gpus, lora: config.lora };
  checkPackages(probe, needs);

  // 3. the resolved config, then the worker
  const madeOut = !existsSync(config.out);
  await mkdir(config.out, { recursive: true });
  const configPath = join(config.out, 'config.json');
  const writeConfig = (devices?: { cuda_devices: number }) =>
    writeFile(
      configPath,
      `${JSON.stringify({ ...config, environment: environmentRecord(probe, devices) }, null, 2)}\n`,
    );
  await writeConfig();
  const processes = config.device === 'cpu' ? config.nproc : config.gpus;
  const cmd = workerCommand({
    python: probe.python,
    configPath,
    processes,
    pythonPath: process.env.PYTHONPATH,
    nodes: req.nodes,
  });
  const logPath = workerLogPath(config.out, req.nodes);
  const progress = deps.progress ?? new TrainProgress({ json: req.json ?? false });
  progress.start(
    `training ${config.model} on ${plural(data.rollouts, 'rollout')} (${plural(data.traces, 'trace')}, ${plural(data.trainedTokens, 'trained token')}), ` +
      `device ${config.device}${processes > 1 ? ` x${processes}` : ''}${req.nodes && req.nodes.nnodes > 1 ? `, node ${req.nodes.nodeRank} of ${req.nodes.nnodes}` : ''}, torch ${probe.torch}`,
  );
  const { outcome, refused } = await superviseWorker({
    cmd,
    logPath,
    progress,
    req,
    check: (devices) => checkDevice({ python: probe.python, torch: probe.torch, ...devices }, needs),
    record: writeConfig,
  });
  if (refused) {
    // the worker stopped at its first event, before writing anything: a refused run leaves nothing behind
    progress.stop(false);
    for (const file of [configPath, logPath]) await rm(file, { force: true });
    if (madeOut) await rm(config.out, { recursive: true, force: true });
    throw refused;
  }
  if (req.signal?.aborted) {
    progress.stop(false);
    throw stoppedTraining(req.signal, config.out);
  }
  // c10d gives global rank 0 (the `done` event) to any node (torchrun ignores --node-rank with it)
  const follower = Boolean(req.nodes && req.nodes.nnodes > 1 && !outcome.done);
  const error = workerError(outcome, { logPath, out: config.out, follower });
  if (error) {
    progress.stop(false);
    if (outcome.error?.traceback) log.debug(String(outcome.error.traceback));
    throw error;
  }
  const checkpoint = (outcome.done?.checkpoint as string | null | undefined) ?? null;
  const steps = Number(outcome.done?.steps ?? 0);
  progress.stop(
    true,
    follower ? FOLLOWER_DONE : `done: ${plural(steps, 'step')}, checkpoint ${checkpoint ?? '(none)'}`,
  );
  return {
    config,
    configPath,
    metricsPath: join(config.out, CHECKPOINT_FILES.metrics),
    checkpoint,
    steps,
    data,
  };
}

/**
 * Runs the worker with the launcher's check of its first event (`environment`: the devices an imported
 * torch sees): a refusal stops the worker before it loads or writes anything; otherwise the devices are
 * recorded in config.json (the worker has read it already). A stop signal stops the worker too.
 */
async function superviseWorker(o: {
  cmd: WorkerCommand;
  logPath: string;
  progress: TrainProgress;
  /** its stop signal, and who gets each step event (--report-to) */
  req: Pick<TrainRequest, 'signal' | 'onStep'>;
  check: (devices: PythonDevices) => void;
  record: (devices: PythonDevices) => Promise<void>;
}): Promise<{ outcome: WorkerOutcome; refused: unknown }> {
  const stop = new AbortController();
  let refused: unknown;
  let recorded: Promise<void> = Promise.resolve();
  const onEvent = (event: Record<string, unknown>) => {
    if (event.event === 'step') o.req.onStep?.(event);
    if (event.event !== 'environment') return o.progress.event(event);
    const devices = event as unknown as PythonDevices;
    try {
      o.check(devices);
    } catch (error) {
      refused = error;
      stop.abort();
      return;
    }
    recorded = o.record(devices);
    o.progress.event(event);
  };
  const signal = o.req.signal ? AbortSignal.any([o.req.signal, stop.signal]) : stop.signal;
  const outcome = await runWorker(o.cmd, onEvent, o.logPath, signal);
  await recorded;
  return { outcome, refused };
}

/** The worker was stopped by a signal: what is kept, and how to go on. */
function stoppedTraining(signal: AbortSignal, out: string): InterruptedError {
  const latest = join(out, CHECKPOINT_FILES.latest);
  const kept = existsSync(latest) ? readFileSync(latest, 'utf8').trim() : null;
  return new InterruptedError(
    stopSignalOf(signal),
    kept
      ? `training stopped; the last checkpoint is ${join(out, kept)}`
      : 'training stopped before its first checkpoint',
    kept ? 'run the same command with --resume to continue from it' : 'run the same command again',
  );
}

const FOLLOWER_DONE =
  "done: this node's processes finished; the node that holds global rank 0 wrote the checkpoints";

/** Each node's launcher writes its own log: on a shared --out they would otherwise overwrite each other. */
function workerLogPath(out: string, nodes: NodeRole | undefined): string {
  const rank = nodes && nodes.nnodes > 1 ? nodes.nodeRank : 0;
  return join(out, rank > 0 ? `worker-node${rank}.log` : 'worker.log');
}

/** No group has rewards that differ: every advantage is 0, GRPO would run at loss 0 and learn nothing. */
function zeroAdvantage(file: string, data: TrajectorySummary): InputError {
  return new InputError(
    file,
    undefined,
    'advantage',
    `no trajectory has a non-zero advantage (${plural(data.rollouts, 'rollout')} in ${plural(data.groups, 'group')} whose rewards are all equal): training would run at loss 0 and learn nothing`,
    'sample each task several times so a group holds different rewards (polar eval --samples 4 or more, then polar build), or check the rewards',
  );
}
