/** The body of `polar loop`: typed flags in, runLoop, exit code out. */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { EXIT, UsageError } from '../errors.ts';
import { qwen3TokenizerDir, tokenizerVocabSize } from '../export/export.ts';
import type { HarnessName } from '../harnesses/types.ts';
import { type BackendFlags, backendOptions, backendUrls } from '../options/backend.ts';
import { type GivenOptions, recordOf } from '../options/config.ts';
import {
  DEFAULTS,
  type OverduePolicy,
  type OverlongMode,
  type PauseMode,
  type WeightSyncChoice,
} from '../options/defaults.ts';
import { type ReportFlags, reportSetup } from '../options/report.ts';
import { agentOf } from '../rollout/agent-names.ts';
import { checkDatasetSpec } from '../rollout/dataset.ts';
import { type ClusterFlags, type RolloutFlags, runtimeSetup } from '../rollout/flags.ts';
import { type JudgeFlags, rewardSetup } from '../rollout/judge/setup.ts';
import { type Grader, rolloutVerifier } from '../rollout/verifier.ts';
import { nodesTraining } from '../train/cluster/train.ts';
import { readUserConfig, resolveTrainConfig } from '../train/config.ts';
import { checkTrainer } from '../train/model-info.ts';
import { flagsToOptions, type TrainOptionFlags } from '../train/options.ts';
import { InterruptedError, onStopSignals } from '../util/interrupt.ts';
import { log } from '../util/log.ts';
import { loopCluster } from './cluster.ts';
import { LOOP_RESUME_HINT, type StepSummary } from './files.ts';
import { type LoopOptions, runLoop } from './loop.ts';

/** `polar loop` flags after parsing (commands/loop.ts). */
export interface LoopFlags extends BackendFlags, RolloutFlags, ClusterFlags, JudgeFlags, ReportFlags {
  trainSet: string;
  /** the options given (command line and --config), by long flag name: what the run records for --config */
  given?: GivenOptions;
  evalSet?: string;
  /** --agent: the harness the rollouts run */
  agent?: HarnessName;
  /** --harness, the old name of --agent (deprecated, as polar eval's) */
  harness?: HarnessName;
  promptTemplate?: string;
  trainModel?: string;
  groupSize: number;
  tasksPerStep: number;
  steps: number;
  evalEvery: number;
  /** --max-staleness (DEFAULTS.maxStaleness) */
  maxStaleness?: number;
  /** --overdue (DEFAULTS.overdue) */
  overdue?: OverduePolicy;
  /** --oversample (DEFAULTS.oversample) */
  oversample?: number;
  out: string;
  concurrency: number;
  reloadCmd?: string;
  /** --weight-sync, --weight-sync-pause, --weight-sync-address (src/loop/publish-types.ts) */
  weightSync?: WeightSyncChoice;
  weightSyncPause?: PauseMode;
  weightSyncAddress?: { host: string; port?: number };
  trainConfig?: string;
  /** polar train's --device, --lora, --lr (undefined = not given: --train-config or train's default) */
  device?: TrainOptionFlags['device'];
  lora?: TrainOptionFlags['lora'];
  lr?: TrainOptionFlags['lr'];
  gradeEmptyPatches?: boolean;
  rejectTestTampering?: boolean;
  /** --overlong and --overlong-buffer, for the steps' builds (recorded in the trajectories, applied in training) */
  overlong?: OverlongMode;
  overlongBuffer?: number;
  /** --dynamic-sampling N: extra rounds of tasks while groups are uniform (0: off) */
  dynamicSampling?: number;
  /** polar, or a verifier command (src/rollout/verifier.ts) */
  grader: Grader;
  resume?: boolean;
  quiet?: boolean;
  /** --json: a summary of the run as one JSON line on stdout at the end */
  json?: boolean;
  /** --train-nodes N (DEFAULTS.trainNodes): each step's training across N nodes of the --cluster */
  trainNodes?: number;
}

/** The loop's options from its flags (the evaluation part is the setup polar eval makes). */
export function loopOptions(f: LoopFlags, warn: (message: string) => void = (m) => log.warn(m)): LoopOptions {
  const agent = agentOf(f, 'loop', warn);
  // with the embedded engine the loop exports every checkpoint it serves, the starting one too
  const backend = backendOptions(f, { exportsCheckpoints: true });
  if (f.cluster && backend.kind === 'embedded')
    throw new UsageError(
      `--cluster ${f.cluster.engine} with --backend embedded: the cluster's nodes cannot reach a model inside this process`,
      'serve the policy (vLLM, SGLang) where the nodes reach it and give --backend and --backend-url (docs/cluster.md)',
    );
  const trainNodes = f.trainNodes ?? DEFAULTS.trainNodes.value;
  if (f.maxStaleness && trainNodes > 1)
    throw new UsageError(
      `--max-staleness ${f.maxStaleness} with --train-nodes ${trainNodes}: the asynchronous loop trains on this machine only`,
      'leave --max-staleness at 0 to train across nodes, or --train-nodes at 1 (docs/loop.md)',
    );
  const nodes = nodesTraining(f.cluster, trainNodes, f.clusterPolar);
  if (f.maxStaleness && (f.dynamicSampling || f.cluster))
    throw new UsageError(
      `--max-staleness ${f.maxStaleness} with ${f.dynamicSampling ? '--dynamic-sampling' : '--cluster'}: the asynchronous loop runs each group on this machine and draws no extra rounds yet`,
      'leave --max-staleness at 0 to use it, or drop the other flag (docs/loop.md)',
    );
  const overdue = f.overdue ?? DEFAULTS.overdue.value;
  if (overdue !== 'wait' && !f.maxStaleness)
    throw new UsageError(
      `--overdue ${overdue} without --max-staleness: at 0 every step waits for its own groups, none is ever overdue`,
      'give --max-staleness 1 or more with it, or drop --overdue (docs/loop.md, "Overdue groups")',
    );
  if (f.oversample && overdue !== 'drop')
    throw new UsageError(
      `--oversample ${f.oversample} without --overdue drop: under ${f.maxStaleness ? '--overdue wait a step waits for its due groups, so groups beyond the window only add work that goes stale' : '--max-staleness 0 every step runs exactly its own groups'}`,
      'give --max-staleness 1 or more and --overdue drop with it, or drop --oversample (docs/loop.md, "Over-sampling")',
    );
  const trainModel = f.trainModel ?? backend.model;
  const rewards = rewardSetup(f, { groups: true, command: 'loop' });
  // the judge runs where the samples are recorded: not yet on a cluster (as polar eval says)
  if (f.cluster && (rewards.judge || f.reward !== undefined))
    throw new UsageError(
      `--cluster with ${rewards.judge ? 'a judge' : '--reward'}: not supported yet`,
      'run the judged loop on one machine, or grade the cluster rollouts with --grader polar',
    );
  return {
    trainSet: f.trainSet,
    ...(f.evalSet ? { evalSet: f.evalSet } : {}),
    agent: {
      agent,
      ...(f.promptTemplate ? { promptTemplate: f.promptTemplate } : {}),
      ...(f.piApi ? { piApi: f.piApi } : {}),
      ...(f.passEnv?.length ? { passEnv: f.passEnv } : {}),
    },
    runtime: runtimeSetup(f, f.trainSet),
    backend,
    trainModel: existsSync(trainModel) ? resolve(trainModel) : trainModel,
    groupSize: f.groupSize,
    tasksPerStep: f.tasksPerStep,
    steps: f.steps,
    evalEvery: f.evalEvery,
    ...(f.maxStaleness ? { maxStaleness: f.maxStaleness } : {}),
    // (the default is left out of the options: a run's config.json reads as it did before the flag)
    ...(overdue !== DEFAULTS.overdue.value ? { overdue } : {}),
    ...(f.oversample ? { oversample: f.oversample } : {}),
    out: f.out,
    concurrency: f.concurrency,
    agentTimeoutMs: f.agentTimeout,
    testTimeoutMs: f.testTimeout,
    resume: Boolean(f.resume),
    gradeEmptyPatches: Boolean(f.gradeEmptyPatches),
    ...(f.rejectTestTampering !== undefined ? { rejectTestTampering: f.rejectTestTampering } : {}),
    overlong: {
      mode: f.overlong ?? DEFAULTS.overlong.value,
      buffer: f.overlongBuffer ?? DEFAULTS.overlongBuffer.value,
    },
    ...(f.dynamicSampling ? { dynamicSampling: f.dynamicSampling } : {}),
    ...verifierOf(f.grader),
    ...(rewards.judge || f.reward ? { rewards } : {}),
    ...(f.reloadCmd ? { reloadCmd: f.reloadCmd } : {}),
    ...weightSyncOf(f),
    ...(f.trainConfig ? { trainConfig: f.trainConfig } : {}),
    // loop.json's `config`: given back as --config, the run again (--resume is the command line's to give)
    ...(f.given ? { config: recordOf(f.given, ['resume']) } : {}),
    ...(f.cluster ? { cluster: loopCluster({ ...f, cluster: f.cluster }) } : {}),
    ...(nodes ? { trainNodes: nodes } : {}),
    trainFlags: flagsToOptions({ device: f.device, lora: f.lora, lr: f.lr }),
    report: reportSetup(f, f.out),
    exportOnnx: async (checkpoint, dir, signal) => {
      const { runExport } = await import('../export/export.ts');
      await runExport({ checkpoint, onnx: dir, ...(signal ? { signal } : {}) });
    },
  };
}

/**
 * What the loop's first train step needs, checked before any rollout: train.json and the train flags
 * valid (LoRA, from either, refused with --train-nodes > 1), a Python with torch (CUDA for --device cuda), the model found, and its vocabulary as large as the
 * rollouts' tokenizer (with the embedded backend: the model's own tokenizer files, else the Qwen3 one
 * the export adds; with a server: --tokenizer when it is a directory).
 */
export async function checkLoopTrainer(o: LoopOptions): Promise<void> {
  const file = o.trainConfig ? await readUserConfig(o.trainConfig) : undefined;
  const config = resolveTrainConfig({
    trajectories: '',
    out: o.out,
    file,
    flags: { ...o.trainFlags, model: o.trainModel },
    configFile: o.trainConfig ? { path: o.trainConfig, flag: '--train-config' } : undefined,
    // --lora or train.json's "lora" with --train-nodes N: refused here, before any rollout
    nodes: o.trainNodes ? { count: o.trainNodes.nodes, flag: '--train-nodes' } : undefined,
  });
  const tokenizer =
    o.backend.kind === 'embedded'
      ? existsSync(join(o.trainModel, 'tokenizer.json'))
        ? o.trainModel
        : qwen3TokenizerDir()
      : o.backend.tokenizer && existsSync(join(o.backend.tokenizer, 'tokenizer.json'))
        ? o.backend.tokenizer
        : null;
  await checkTrainer({
    model: o.trainModel,
    flag: '--train-model',
    device: config.device,
    gpus: config.gpus,
    lora: config.lora,
    ...(tokenizer
      ? {
          tokenizerVocab: {
            size: tokenizerVocabSize(tokenizer),
            what: `the tokenizer of the rollouts (${tokenizer})`,
          },
        }
      : {}),
  });
}

/**
 * --weight-sync and its flags, as the loop's publisher takes them (left out at their defaults: a run's
 * config.json reads as before the flags).
 */
function weightSyncOf(f: LoopFlags): Pick<LoopOptions, 'weightSync'> {
  const choice = f.weightSync ?? DEFAULTS.weightSync.value;
  const pause = f.weightSyncPause ?? DEFAULTS.weightSyncPause.value;
  if (f.weightSyncAddress && choice !== 'nccl')
    throw new UsageError(
      `--weight-sync-address with --weight-sync ${choice}: the address is the NCCL group's rendezvous`,
      'give --weight-sync nccl with it, or drop --weight-sync-address',
    );
  if (choice === 'restart' && !f.reloadCmd)
    throw new UsageError(
      '--weight-sync restart without --reload-cmd',
      'give --reload-cmd "<command that restarts the server on {checkpoint}>"',
    );
  const servers = backendUrls(f);
  const sync = {
    ...(choice !== DEFAULTS.weightSync.value ? { choice } : {}),
    ...(pause !== DEFAULTS.weightSyncPause.value ? { pause } : {}),
    ...(f.weightSyncAddress ? { rendezvous: f.weightSyncAddress } : {}),
    ...(servers.length > 1 ? { servers } : {}),
  };
  return Object.keys(sync).length ? { weightSync: sync } : {};
}

/** --grader: polar (the default) or a verifier command; swebench grades after a run, not within a step. */
function verifierOf(grader: Grader): { verifier?: string } {
  const verifier = rolloutVerifier(grader, 'polar loop grades each rollout itself');
  return verifier ? { verifier } : {};
}

/**
 * `polar loop --json`'s one line: the run folder, the steps done, the last checkpoint (the starting model
 * when no step ran) and each step's step.json as written (docs/loop.md, "The run folder").
 */
export function loopSummary(
  out: string,
  steps: StepSummary[],
): { out: string; steps_done: number; checkpoint: string | null; steps: StepSummary[] } {
  return { out: resolve(out), steps_done: steps.length, checkpoint: steps.at(-1)?.checkpoint ?? null, steps };
}

export async function loopCommand(f: LoopFlags): Promise<number> {
  log.configure({ quiet: Boolean(f.quiet) });
  const options = loopOptions(f);
  // a missing task file is said before the slow checks (exit 3, as every command's missing input)
  for (const set of [options.trainSet, options.evalSet]) if (set) checkDatasetSpec(set);
  // the trainer's set-up (Python, device, model, vocabulary) before the first rollout, not after it
  await checkLoopTrainer(options);
  // SIGINT, SIGTERM and SIGHUP alike: the running phase stops, no new one starts (InterruptedError)
  const interrupt = onStopSignals('stopping the running step (run again with --resume to continue)');
  let summaries: Awaited<ReturnType<typeof runLoop>>;
  try {
    summaries = await runLoop({ ...options, signal: interrupt.signal });
  } catch (error) {
    // a stop inside a step's training or export says what polar train / export would ("run the same
    // command again"): for the loop, the way on is --resume
    throw error instanceof InterruptedError ? error.withHint(LOOP_RESUME_HINT) : error;
  } finally {
    interrupt.dispose();
  }
  const last = summaries.at(-1);
  if (last) log.info(`loop finished at step ${last.step}: policy ${last.checkpoint}`);
  if (f.json) process.stdout.write(`${JSON.stringify(loopSummary(options.out, summaries))}\n`);
  return EXIT.ok;
}
