/**
 * The phases of a loop step that the strict loop (loop.ts) and the asynchronous one (async-loop.ts) share:
 * an evaluation of some tasks on the loop's backend (locally, or fanned out with --cluster), a step's
 * training (here, or across nodes with --train-nodes), the ONNX export the embedded backend serves,
 * publishing a checkpoint, and the check for a stop signal after each.
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Backend } from '../backends/types.ts';
import { ensureBackendReady } from '../backends/wait.ts';
import { UsageError } from '../errors.ts';
import { DEFAULTS } from '../options/defaults.ts';
import type { SweInstance } from '../rollout/dataset.ts';
import { type EvalOutcome, runEval } from '../rollout/run/run.ts';
import { type EvaluationSetup, setupEvaluation } from '../rollout/setup.ts';
import { trainAcrossNodes } from '../train/cluster/train.ts';
import { readUserConfig, resolveTrainConfig } from '../train/config.ts';
import { runTrain, type TrainRequest } from '../train/launch.ts';
import { CHECKPOINT_FILES } from '../train/schema.ts';
import { throwIfStopped } from '../util/interrupt.ts';
import { log } from '../util/log.ts';
import { clusterRollouts, stepJob } from './cluster.ts';
import { LOOP_FILES, stepDirName } from './files.ts';
import type { LoopOptions } from './options.ts';
import type { Publisher } from './publish.ts';

export async function exportTo(checkpoint: string, onnxDir: string, o: LoopOptions): Promise<void> {
  if (!o.exportOnnx)
    throw new UsageError(
      'the embedded backend needs an ONNX export of each checkpoint, and no exporter is available',
    );
  await rm(onnxDir, { recursive: true, force: true });
  await o.exportOnnx(checkpoint, onnxDir, o.signal);
  stopped(o, `the export of ${checkpoint} was cut short`);
}

/** After a phase: a signal stops the loop there (the unfinished step is redone by --resume). */
export function stopped(o: Pick<LoopOptions, 'signal'>, what: string): void {
  throwIfStopped(
    o.signal,
    what,
    'run the same command with --resume to continue (an unfinished step is redone)',
  );
}

export async function publish(
  publisher: Publisher,
  checkpoint: string,
  onnxDir: string,
  o: LoopOptions,
  version?: number,
): Promise<void> {
  if (publisher.needsOnnx) await exportTo(checkpoint, onnxDir, o);
  await publisher.publish({
    checkpoint,
    ...(publisher.needsOnnx ? { onnx: onnxDir } : {}),
    ...(version !== undefined ? { version } : {}),
  });
  // a restarted or reloaded server is checked again: a --reload-cmd that drops a server flag
  // (--enable-auto-tool-choice, --served-model-name) stops here, not after a step of failed rollouts
  if (!o.backendInstance) await ensureBackendReady(o.backend, o.signal);
}

/**
 * The setup of every evaluation of the loop: the harness on the loop's backend, in the loop's runtime. On
 * a cluster the samples spread over every --backend-url, as polar eval --cluster spreads them (the local
 * loop's own rollouts use the first; docs/loop.md, "Publishing new weights").
 */
export function loopEvaluation(
  o: Pick<LoopOptions, 'agent' | 'backend' | 'runtime' | 'cluster' | 'weightSync'>,
): EvaluationSetup {
  const servers = o.cluster ? o.weightSync?.servers : undefined;
  return {
    agent: { ...o.agent, backend: o.backend, ...(servers ? { backendUrls: servers } : {}) },
    runtime: o.runtime,
  };
}

export async function evaluate(
  o: LoopOptions,
  backend: Backend,
  instances: SweInstance[],
  samples: number,
  out: string,
  dataset: string,
  meta: Record<string, string>,
): Promise<EvalOutcome> {
  if (o.cluster) {
    const run = {
      instanceIds: instances.map((i) => i.instance_id),
      samples,
      out,
      dataset,
      concurrency: o.concurrency,
      meta,
      quiet: log.quiet,
      ...(o.signal ? { signal: o.signal } : {}),
    };
    return clusterRollouts(o.cluster, run, stepJob(loopEvaluation(o), o, o.cluster, run));
  }
  const { agent, runtime } = await setupEvaluation(loopEvaluation(o), { backendInstance: backend });
  await runtime.check(instances);
  try {
    return await runEval({
      instances,
      agent,
      runtime,
      out,
      samples,
      concurrency: o.concurrency,
      agentTimeoutMs: o.agentTimeoutMs,
      testTimeoutMs: o.testTimeoutMs,
      resume: false,
      dataset,
      // one line per graded sample with the ETA, as polar eval shows (-q: none)
      progress: !log.quiet,
      meta,
      ...(o.gradeEmptyPatches ? { gradeEmpty: true } : {}),
      rejectTampering: o.rejectTestTampering ?? DEFAULTS.trainingRejectsTampering.value,
      ...(o.verifier ? { verifier: o.verifier } : {}),
      ...(o.rewards ? { rewards: o.rewards } : {}),
      ...(o.signal ? { signal: o.signal } : {}),
    });
  } finally {
    await agent.close?.();
  }
}

/**
 * The training run step n continues: from step 2 on, the previous step's (its weights are the policy that
 * sampled step n's rollouts; the optimiser's moments and schedule carry over), when it left a checkpoint.
 */
export function previousTrainRun(out: string, n: number): string | undefined {
  if (n <= 1) return undefined;
  const dir = join(out, stepDirName(n - 1), LOOP_FILES.train);
  return existsSync(join(dir, CHECKPOINT_FILES.latest)) ? dir : undefined;
}

/**
 * A step's training: runTrain on this machine, or with --train-nodes the same request as one `polar
 * train` across the cluster's nodes (src/train/cluster/train.ts), which leaves the train/ folder a local run
 * leaves. Each node starts the processes the resolved config asks (--nproc on the CPU, --gpus on CUDA).
 */
export async function trainStep(o: LoopOptions, req: TrainRequest): Promise<{ checkpoint: string | null }> {
  if (!o.trainNodes) return runTrain(req);
  const config = resolveTrainConfig({
    trajectories: req.trajectories,
    out: req.out,
    resume: req.resume,
    file: req.configFile ? await readUserConfig(req.configFile) : undefined,
    flags: req.flags,
    configFile: req.configFile ? { path: req.configFile, flag: '--train-config' } : undefined,
    nodes: { count: o.trainNodes.nodes, flag: '--train-nodes' },
  });
  const processes = config.device === 'cpu' ? config.nproc : config.gpus;
  return trainAcrossNodes(o.trainNodes, req, { device: config.device, processes });
}
