/**
 * `polar loop`: rollouts -> build -> train -> new weights -> rollouts. Each step N lives in run/step-N/:
 *   eval/        the graded rollouts of this step (polar eval's output: captures/, results.jsonl, report.json)
 *   traj.jsonl   polar build of eval/ (rewards, one group per task); build-stats.json beside it
 *   train/       polar train's output from the previous step's checkpoint (metrics.jsonl, step-K/)
 *   onnx/        the export the embedded backend reloads (embedded only)
 *   heldout/     polar eval on the held-out set, every --eval-every steps
 *   step.json    written last: a step with step.json {status: "done"} is finished
 * run/step-0/ holds the starting policy: onnx/ (embedded) and heldout/, the held-out eval before training
 * (with --eval-set), the baseline the later held-out evals are read against.
 * --resume skips finished steps and continues an unfinished one: its graded rollouts, a finished training,
 * its export and held-out samples are kept (phases.ts keptStep). The same work as a shell
 * pipeline is in docs/loop.md.
 */
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createBackend } from '../backends/index.ts';
import type { Backend } from '../backends/types.ts';
import { ensureBackendReady } from '../backends/wait.ts';
import { runBuild } from '../build/command.ts';
import { InputError, PolarError, UsageError } from '../errors.ts';
import { loadDataset, type SweInstance } from '../rollout/dataset.ts';
import { ensureDatasetRepos } from '../rollout/dataset-repos.ts';
import { EVAL_FILES } from '../rollout/run/files.ts';
import type { EvalOutcome } from '../rollout/run/run.ts';
import type { Reporter } from '../train/tracking/reporter.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import { mkdirPrivate, PRIVATE_FILE } from '../util/private-files.ts';
import { redactUrl } from '../util/redact.ts';
import { firstIssue } from '../util/zod.ts';
import { firstDraw, nextRow, type Round, recordedDraws, sampleStep } from './dynamic-sampling.ts';
import { LOOP_FILES, type StepSummary, stepDirName, stepSummarySchema } from './files.ts';
import { observeBaseline, observeStep, openLoopReporter, trainSteps } from './observe.ts';
import { type LoopOptions, rate, type StepContext, tasksForStep } from './options.ts';
import {
  evaluate,
  exportTo,
  keptStep,
  keptTraining,
  previousTrainRun,
  publish,
  stopped,
  trainStep,
} from './phases.ts';

export type { LoopOptions, StepContext } from './options.ts';
export { rate, tasksForStep } from './options.ts';

import { type Publisher, type PublisherOptions, publisherFor } from './publish.ts';

/** A done step's summary; null when the step did not finish (no step.json, or one cut short). */
async function readStep(dir: string): Promise<StepSummary | null> {
  let text: string;
  try {
    text = await readFile(join(dir, LOOP_FILES.step), 'utf8');
  } catch {
    return null;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null; // written last and whole: a cut file is a step that did not finish
  }
  const parsed = stepSummarySchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const { field, message } = firstIssue(parsed.error, '(file)');
  throw new InputError(
    join(dir, LOOP_FILES.step),
    undefined,
    field,
    message,
    'this step.json was not written by this polar: move the run aside or start another --out',
  );
}

/**
 * loop.json: the run's resolved options, a record of the run (the backend's key and a URL's credentials
 * stay out of it); its `config`, the options given by flag name, is what `polar loop --config` reads back.
 */
export function loopRecord(o: LoopOptions): Record<string, unknown> {
  const { backendInstance: _b, exportOnnx: _e, crashAfter: _c, signal: _s, ...recordable } = o;
  const { apiKey: _k, ...shown } = o.backend;
  if (shown.url) shown.url = redactUrl(shown.url);
  const servers = recordable.weightSync?.servers;
  if (servers) recordable.weightSync = { ...recordable.weightSync, servers: servers.map(redactUrl) };
  if (recordable.rewards?.judge) {
    const { apiKey: _j, rubric: _r, ...judge } = recordable.rewards.judge;
    recordable.rewards = {
      ...recordable.rewards,
      judge: { ...judge, url: redactUrl(judge.url) } as typeof judge & { rubric: string },
    };
  }
  return { ...recordable, backend: shown, out: resolve(o.out) };
}

export async function runLoop(o: LoopOptions): Promise<StepSummary[]> {
  const out = resolve(o.out);
  await mkdirPrivate(out);
  const configPath = join(out, LOOP_FILES.config);
  if (existsSync(configPath) && !o.resume) {
    throw new UsageError(
      `${out} already holds a loop run`,
      'pass --resume to continue it, or choose another --out',
    );
  }
  // the server's set-up checked before anything is written or any harness time spent (an injected
  // backend is the caller's to check)
  if (!o.backendInstance) await ensureBackendReady(o.backend, o.signal);
  await writeFile(configPath, `${JSON.stringify(loopRecord(o), null, 2)}\n`, { mode: PRIVATE_FILE });

  const rows = { verifier: Boolean(o.verifier) || o.rewards?.primary === 'judge' };
  const trainSet = await loadDataset(o.trainSet, rows);
  const evalSet = o.evalSet ? await loadDataset(o.evalSet, rows) : [];
  // repositories the sets ship as sources are made on first use, into the run's one repositories folder
  if (o.runtime.kind === 'sandbox' || o.runtime.kind === 'local') {
    ensureDatasetRepos(o.trainSet, o.runtime.repos, trainSet);
    if (o.evalSet) ensureDatasetRepos(o.evalSet, o.runtime.repos, evalSet);
  }
  const summaries: StepSummary[] = [];

  // where the policy is now: the last finished step's checkpoint, or the starting model
  let checkpoint = o.trainModel;
  let first = 1;
  for (let n = 1; n <= o.steps; n++) {
    const done = await readStep(join(out, stepDirName(n)));
    if (!done) break;
    summaries.push(done);
    checkpoint = done.checkpoint;
    first = n + 1;
  }
  if (first > 1) log.info(`resuming after step ${first - 1} (policy ${checkpoint})`);
  if (first > o.steps) return summaries;

  // the backend must serve the policy the loop trains: the starting point, or the resumed step's weights
  const startOnnx = join(out, stepDirName(first > 1 ? first - 1 : 0), LOOP_FILES.onnx);
  let backend: Backend;
  let published = false;
  if (o.backendInstance) backend = o.backendInstance;
  else if (o.backend.kind === 'embedded') {
    await exportTo(checkpoint, startOnnx, o);
    backend = await createBackend({ ...o.backend, model: startOnnx });
    published = true;
  } else backend = await createBackend(o.backend);
  const publisher: Publisher = publisherFor(backend, publisherOptions(o));
  let reporter: Reporter | undefined;
  try {
    // what publishing needs of the server, checked before any rollout; the served weights labelled
    // (version 0; a resumed run's are labelled by publishing them again)
    await publisher.prepare?.(first > 1 ? undefined : 0);
    reporter = await openLoopReporter(o.report, { out, resume: o.resume, first, config: loopRecord(o) });
    if (!published && (publisher.needsOnnx || first > 1))
      await publish(publisher, checkpoint, startOnnx, o, first - 1);
    // every call names the version that sampled it (strict loop too: src/backends/weight-updates.ts)
    backend.policyVersion ??= first - 1;
    if (first === 1) await baselineHeldout(o, backend, evalSet, out, reporter);
    if ((o.maxStaleness ?? 0) > 0) {
      const { runAsyncSteps } = await import('./async-loop.ts');
      const ctx = { out, backend, publisher, trainSet, evalSet, firstRow: 0, reporter };
      summaries.push(...(await runAsyncSteps(o, ctx, first, checkpoint)));
      return summaries;
    }
    for (let n = first; n <= o.steps; n++) {
      stopped(o, `step ${n} was not started`);
      const firstRow = nextRow(summaries, o.tasksPerStep);
      const ctx = { out, backend, publisher, trainSet, evalSet, firstRow, reporter };
      const summary = await runStep(o, ctx, n, checkpoint);
      summaries.push(summary);
      checkpoint = summary.checkpoint;
    }
  } finally {
    await reporter?.close();
    await publisher.close?.();
    if (!o.backendInstance) await backend.close();
  }
  return summaries;
}

/** The publisher's options from the loop's (src/loop/publish.ts). */
function publisherOptions(o: LoopOptions): PublisherOptions {
  const sync = o.weightSync ?? {};
  return {
    backendOptions: o.backend,
    ...(o.reloadCmd ? { reloadCmd: o.reloadCmd } : {}),
    ...(o.trainFlags.lora === true ? { lora: true } : {}),
    ...(sync.choice ? { weightSync: sync.choice } : {}),
    ...(sync.pause ? { pause: sync.pause } : {}),
    ...(sync.rendezvous ? { rendezvous: sync.rendezvous } : {}),
    ...(sync.servers ? { servers: sync.servers } : {}),
  };
}

/** Step n: rollouts from the current policy, build, train from it, publish the new weights, held-out eval. */
async function runStep(
  o: LoopOptions,
  ctx: StepContext,
  n: number,
  checkpoint: string,
): Promise<StepSummary> {
  const { out, backend, publisher } = ctx;
  const crash = (phase: 'eval' | 'build' | 'train') => {
    stopped(o, `step ${n} stopped after its ${phase === 'eval' ? 'rollouts' : phase}`);
    if (o.crashAfter?.step === n && o.crashAfter.phase === phase)
      throw new PolarError(`simulated crash after ${phase} of step ${n}`);
  };
  let policy = `step-${n - 1}`;
  const dir = join(out, stepDirName(n));
  // the draws an unfinished attempt recorded are redone as they were (dynamic-sampling.ts)
  const recorded = o.dynamicSampling ? await recordedDraws(dir) : [];
  // an unfinished step continued by --resume keeps its graded rollouts and a finished training
  const kept = await keptStep(o, dir);
  await mkdirPrivate(dir);
  const started = new Date();
  const first = o.dynamicSampling ? firstDraw(ctx.trainSet, ctx.firstRow, o.tasksPerStep) : null;
  const tasks = first?.tasks ?? tasksForStep(ctx.trainSet, n, o.tasksPerStep);
  log.info(
    `step ${n}/${o.steps}: ${plural(tasks.length, 'task')} x ${plural(o.groupSize, 'sample')} from ${policy}`,
  );

  const meta = { policy, loop_step: String(n) };
  const rollOut = (t: SweInstance[], to: string) =>
    evaluate(o, backend, t, o.groupSize, to, o.trainSet, meta, kept.resume);
  const { rollouts, sampled } = first
    ? await sampleStep({ ...sampling(o, dir, n, recorded), trainSet: ctx.trainSet, first, rollout: rollOut })
    : { rollouts: await rollOut(tasks, join(dir, LOOP_FILES.rollouts)), sampled: null };
  crash('eval');

  const traj = join(dir, LOOP_FILES.trajectories);
  // one GRPO group per task; polar train computes the advantages from them (its --advantage)
  const stats = await runBuild({
    // the rounds' captures folders: their other files (results, predictions) are no captures to count
    inputs: (sampled?.inputs ?? [join(dir, LOOP_FILES.rollouts)]).map((d) => join(d, EVAL_FILES.captures)),
    outputFile: traj,
    groupBy: 'task_id',
    quiet: true,
    ...(sampled?.dropUniform ? { dropUniformGroups: true } : {}),
    ...(o.overlong ? { overlong: o.overlong.mode, overlongBuffer: o.overlong.buffer } : {}),
  });
  await writeFile(join(dir, LOOP_FILES.buildStats), `${JSON.stringify(stats, null, 2)}\n`, {
    mode: PRIVATE_FILE,
  });
  crash('build');

  const trajectories = stats.trajectories_written;
  if (trajectories === 0)
    throw new PolarError(
      `step ${n}: no trajectories were built from the rollouts (see ${dir}/build-stats.json)`,
    );
  const resume = previousTrainRun(out, n);
  // a step whose groups all scored alike teaches nothing (build warned); the loop goes on to the next step
  const trainDir = join(dir, LOOP_FILES.train);
  const trained = kept.trained
    ? keptTraining(kept.trained, trainDir, trainSteps(ctx.reporter))
    : await trainStep(o, {
        allowZeroAdvantage: true,
        trajectories: traj,
        out: trainDir,
        configFile: o.trainConfig,
        ...(resume ? { resume } : {}),
        ...(o.signal ? { signal: o.signal } : {}),
        onStep: trainSteps(ctx.reporter),
        // the served name (vLLM --served-model-name) is the policy the rollouts came from
        sampledBy: [o.backend.model],
        flags: {
          ...o.trainFlags,
          ...(resume ? {} : { model: checkpoint }),
          // one update per step: with dynamic sampling, the trajectories of its informative groups
          batch_rollouts: sampled ? trajectories : tasks.length * o.groupSize,
          epochs: 1,
        },
      });
  crash('train');
  if (!trained.checkpoint) throw new PolarError(`step ${n}: training wrote no checkpoint`);
  policy = `step-${n}`;
  await publish(publisher, trained.checkpoint, join(dir, LOOP_FILES.onnx), o, n);

  const heldoutRun = await heldoutAt(o, ctx, dir, n, policy, kept.resume);
  const heldout = heldoutRun ? { pass_at_1: heldoutRun.report.pass_at_1.mean } : null;
  const summary: StepSummary = {
    step: n,
    status: 'done',
    started_at: started.toISOString(),
    ended_at: new Date().toISOString(),
    policy: `step-${n - 1}`,
    checkpoint: trained.checkpoint,
    tasks: (sampled?.tasks ?? tasks).map((t) => t.instance_id),
    rollouts: { pass_at_1: rollouts.report.pass_at_1.mean, samples: rollouts.report.total },
    heldout,
    trajectories,
    trainable_tokens: stats.tokens_trainable,
    overlong: {
      calls: stats.calls_length,
      traces: stats.traces_overlong,
      masked: stats.overlong_masked,
      penalised: stats.overlong_penalised,
    },
    ...(sampled ? { dynamic_sampling: sampled.summary } : {}),
  };
  summary.health = observeStep(ctx.reporter, n, { record: summary, rollouts, stats, heldout: heldoutRun });
  await writeFile(join(dir, LOOP_FILES.step), `${JSON.stringify(summary, null, 2)}\n`, {
    mode: PRIVATE_FILE,
  });
  log.info(
    `step ${n} done: pass@1 ${rate(summary.rollouts.pass_at_1)} on rollouts${heldout ? `, held-out ${rate(heldout.pass_at_1)}` : ''}`,
  );
  return summary;
}

/** Step n's held-out eval of its new policy, on the steps --eval-every names; null on the others. */
async function heldoutAt(
  o: LoopOptions,
  ctx: StepContext,
  dir: string,
  n: number,
  policy: string,
  resume: boolean,
): Promise<EvalOutcome | null> {
  if (!o.evalSet || !ctx.evalSet.length || o.evalEvery <= 0 || n % o.evalEvery !== 0) return null;
  const meta = { policy, loop_step: String(n), heldout: '1' };
  const to = join(dir, LOOP_FILES.heldout);
  const r = await evaluate(o, ctx.backend, ctx.evalSet, 1, to, o.evalSet, meta, resume);
  stopped(o, `step ${n} stopped during its held-out evaluation`);
  return r;
}

/**
 * The held-out eval of the starting policy (step-0/heldout): the baseline later held-out evals are read
 * against. Kept on --resume once its report is written; redone when it was cut short.
 */
export async function baselineHeldout(
  o: LoopOptions,
  backend: Backend,
  evalSet: SweInstance[],
  out: string,
  reporter: Reporter,
): Promise<void> {
  if (!o.evalSet || evalSet.length === 0 || o.evalEvery === 0) return;
  const dir = join(out, stepDirName(0), LOOP_FILES.heldout);
  if (existsSync(join(dir, EVAL_FILES.report))) return;
  await rm(dir, { recursive: true, force: true });
  const r = await evaluate(o, backend, evalSet, 1, dir, o.evalSet, {
    policy: 'step-0',
    loop_step: '0',
    heldout: '1',
  });
  stopped(o, 'the held-out evaluation of the starting policy was cut short');
  observeBaseline(reporter, r);
  log.info(`held-out pass@1 of the starting policy: ${rate(r.report.pass_at_1.mean)}`);
}

/** The loop's side of a step's dynamic sampling (dynamic-sampling.ts). */
function sampling(o: LoopOptions, stepDir: string, step: number, recorded: Round[]) {
  return {
    stepDir,
    step,
    quota: o.tasksPerStep,
    extraRounds: o.dynamicSampling ?? 0,
    recorded,
    ...(o.overlong ? { overlong: o.overlong } : {}),
    afterRound: () => stopped(o, `step ${step} stopped during its rollouts`),
  };
}
