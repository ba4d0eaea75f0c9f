/**
 * The phases of a loop step that the strict loop (loop.ts) and the asynchronous one (async-loop.ts) share:
 * an evaluation of some tasks on the loop's backend (locally, or fanned out with --cluster), a step's
 * training (here, or across nodes with --train-nodes), the ONNX export the embedded backend serves,
 * publishing a checkpoint, and the check for a stop signal after each; and what an interrupted step keeps
 * for --resume (keptStep): its graded rollouts, a finished training and its export.
 */
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
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
import { LOOP_FILES, LOOP_RESUME_HINT, stepDirName } from './files.ts';
import type { LoopOptions } from './options.ts';
import type { Publisher } from './publish.ts';

/** The checkpoint a polar export folder was made from (config.json `polar_export.source`), or null. */
function exportedFrom(onnxDir: string): string | null {
  try {
    const source = JSON.parse(readFileSync(join(onnxDir, 'config.json'), 'utf8'))?.polar_export?.source;
    return typeof source === 'string' ? source : null;
  } catch {
    return null;
  }
}

export async function exportTo(checkpoint: string, onnxDir: string, o: LoopOptions): Promise<void> {
  if (!o.exportOnnx)
    throw new UsageError(
      'the embedded backend needs an ONNX export of each checkpoint, and no exporter is available',
    );
  // an export is moved into place whole (polar_train/export.py): one of this checkpoint is kept (--resume)
  const source = exportedFrom(onnxDir);
  if (source !== null && source === (checkpoint.startsWith('tiny:') ? checkpoint : resolve(checkpoint))) {
    log.info(`kept the export of ${checkpoint} in ${onnxDir}`);
    return;
  }
  await rm(onnxDir, { recursive: true, force: true });
  await o.exportOnnx(checkpoint, onnxDir, o.signal);
  stopped(o, `the export of ${checkpoint} was cut short`);
}

/** After a phase: a signal stops the loop there (--resume continues the unfinished step). */
export function stopped(o: Pick<LoopOptions, 'signal'>, what: string): void {
  throwIfStopped(o.signal, what, LOOP_RESUME_HINT);
}

/** The checkpoint a step's finished training left (train/latest names it), or null. */
export function finishedTraining(trainDir: string): string | null {
  const latest = join(trainDir, CHECKPOINT_FILES.latest);
  if (!existsSync(latest)) return null;
  const step = resolve(trainDir, readFileSync(latest, 'utf8').trim());
  return existsSync(join(step, CHECKPOINT_FILES.state)) ? step : null;
}

/** A kept training (keptStep): its checkpoint, its metrics.jsonl lines logged again (--report-to). */
export function keptTraining(
  checkpoint: string,
  trainDir: string,
  onStep: (event: Record<string, unknown>) => void,
): { checkpoint: string } {
  const metrics = join(trainDir, CHECKPOINT_FILES.metrics);
  const lines = existsSync(metrics) ? readFileSync(metrics, 'utf8').split('\n') : [];
  for (const line of lines.filter((l) => l.trim() !== '')) {
    try {
      onStep(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // a line the worker's trim drops next time (cut by a kill): not logged
    }
  }
  return { checkpoint };
}

/**
 * What an unfinished step keeps when --resume continues it (issue 47 item 5; it was redone from scratch):
 * its rollouts (each graded sample, as eval --resume keeps them: `resume`), a finished training (its
 * checkpoint: `trained`) and then that checkpoint's export and held-out samples. A training that did not
 * finish is redone, and the export and held-out samples of the step go with it (they were of other
 * weights, or of none). Without --resume, or for a step not begun, the folder is made afresh.
 */
export async function keptStep(
  o: Pick<LoopOptions, 'resume'>,
  dir: string,
): Promise<{ resume: boolean; trained: string | null }> {
  if (!o.resume || !existsSync(dir)) {
    await rm(dir, { recursive: true, force: true });
    return { resume: false, trained: null };
  }
  const trained = finishedTraining(join(dir, LOOP_FILES.train));
  if (!trained)
    for (const sub of [LOOP_FILES.train, LOOP_FILES.onnx, LOOP_FILES.heldout])
      await rm(join(dir, sub), { recursive: true, force: true });
  log.info(
    `continuing the unfinished ${dir}: graded rollouts kept${trained ? `, training kept (${trained})` : ''}`,
  );
  return { resume: true, trained };
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
  resume = false,
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
      ...(resume ? { resume: true } : {}),
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
      // an interrupted step continued by --resume keeps its graded samples, as eval --resume does
      resume,
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
