/**
 * `polar loop --max-staleness K` (K >= 1): the loop's driver of the staleness scheduler (src/loop/async.ts).
 * Each GRPO group is a polar eval run of its own, run/groups/g-NNNNNN/ (captures, results.jsonl,
 * report.json), its samples run in the scheduler's rollout slots; step N builds its batch of groups into
 * run/step-N/traj.jsonl (one GRPO group per loop group: --group-by meta:loop_group), trains from the
 * previous step's run with the trainer's staleness check (policy_version, max_staleness), publishes
 * version N, tells the backend (each later call record's policy_version), runs the held-out eval on its
 * steps, and writes step.json last with the batch's staleness counts and its rollout health; the health,
 * the rollouts' figures and the trainer's optimiser steps go to --report-to as the strict loop's do
 * (src/loop/observe.ts). run/schedule.jsonl is the journal --resume replays. Under --overdue drop a group
 * the scheduler cancels has its harnesses ended by their process groups (EvalOptions.cancel), its cut
 * samples unrecorded, its folder never built into a step. The K = 0 loop
 * (src/loop/loop.ts) is untouched by this file.
 */
import { existsSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { runBuild } from '../build/command.ts';
import { PolarError } from '../errors.ts';
import { DEFAULTS } from '../options/defaults.ts';
import type { SweInstance } from '../rollout/dataset.ts';
import { EVAL_FILES } from '../rollout/run/files.ts';
import { readRunReport } from '../rollout/run/read-report.ts';
import { buildReport, type Report, type ResultLine } from '../rollout/run/report.ts';
import { readResults } from '../rollout/run/results.ts';
import { type EvalOutcome, localExecutor, runEvalWith } from '../rollout/run/run.ts';
import { setupEvaluation } from '../rollout/setup.ts';
import { runTrain, type TrainRequest } from '../train/launch.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import { mkdirPrivate, PRIVATE_FILE } from '../util/private-files.ts';
import { type Batch, fileJournal, readJournal, StalenessScheduler } from './async.ts';
import { groupDirName, LOOP_FILES, type StepSummary, stepDirName } from './files.ts';
import { observeStep, trainSteps } from './observe.ts';
import { type LoopOptions, rate, type StepContext, tasksForStep } from './options.ts';
import { evaluate, keptStep, keptTraining, previousTrainRun, publish, stopped } from './phases.ts';

/** Runs steps first..o.steps with rollouts ahead of training; the policy now is `checkpoint` (version first-1). */
export async function runAsyncSteps(
  o: LoopOptions,
  ctx: StepContext,
  first: number,
  checkpoint: string,
): Promise<StepSummary[]> {
  const { out, backend } = ctx;
  const K = o.maxStaleness ?? 0;
  const journalPath = join(out, LOOP_FILES.schedule);
  const replay = o.resume ? await readJournal(journalPath) : [];
  if (!o.resume) await rm(journalPath, { force: true });
  await mkdirPrivate(join(out, LOOP_FILES.groups));
  const byId = new Map<string, SweInstance>(ctx.trainSet.map((t) => [t.instance_id, t]));
  // every call from here on names the version that served it (the proxy reads it when the call starts)
  backend.policyVersion = first - 1;
  const { agent, runtime } = await setupEvaluation(
    { agent: { ...o.agent, backend: o.backend }, runtime: o.runtime },
    { backendInstance: backend },
  );
  const summaries: StepSummary[] = [];
  let policy = checkpoint;
  try {
    await runtime.check(ctx.trainSet);
    log.info(
      `asynchronous loop: rollouts run up to ${plural(K, 'version')} ahead of training (--max-staleness ${K})`,
    );
    const scheduler = new StalenessScheduler(
      {
        steps: o.steps,
        tasksPerStep: o.tasksPerStep,
        groupSize: o.groupSize,
        maxStaleness: K,
        ...(o.overdue ? { overdue: o.overdue } : {}),
        ...(o.oversample ? { oversample: o.oversample } : {}),
        slots: o.concurrency,
        version: first - 1,
        journal: fileJournal(journalPath),
        replay,
        ...(o.signal ? { signal: o.signal } : {}),
      },
      {
        taskFor: (step, index) => tasksForStep(ctx.trainSet, step, o.tasksPerStep)[index]!.instance_id,
        async runGroup(plan, slots) {
          const dir = join(out, LOOP_FILES.groups, groupDirName(plan.group));
          const instance = byId.get(plan.task);
          if (!instance)
            throw new PolarError(
              `group ${plan.group}: task ${plan.task} is not in --train-set ${o.trainSet}`,
              {
                hint: 'resume with the --train-set the run started with',
              },
            );
          const options = {
            instances: [instance],
            agent,
            runtime,
            out: dir,
            samples: o.groupSize,
            concurrency: o.groupSize,
            agentTimeoutMs: o.agentTimeoutMs,
            testTimeoutMs: o.testTimeoutMs,
            resume: existsSync(dir),
            dataset: o.trainSet,
            progress: false,
            meta: { loop_group: String(plan.group), loop_step: String(plan.meantFor) },
            ...(o.gradeEmptyPatches ? { gradeEmpty: true } : {}),
            rejectTampering: o.rejectTestTampering ?? DEFAULTS.trainingRejectsTampering.value,
            ...(o.verifier ? { verifier: o.verifier } : {}),
            signal: slots.signal,
            // --overdue drop: the scheduler cancels this group alone (its harnesses by pid, nothing recorded)
            cancel: slots.cancel,
          };
          const local = localExecutor(options);
          const cancelled = { interrupted: true };
          const r = await runEvalWith(options, async (jobs, io) => {
            const runs = await Promise.all(
              jobs.map((job) =>
                slots
                  .withSlot(job.sample, () => local([job], io))
                  // a sample of a cancelled group refused its slot: not run, not recorded
                  .catch((error) => (slots.cancel.aborted ? cancelled : Promise.reject(error))),
              ),
            );
            return { interrupted: runs.some((x) => x.interrupted) };
          });
          if (r.interrupted)
            throw (
              slots.signal.reason ??
              slots.cancel.reason ??
              new PolarError(`group ${plan.group} was interrupted`)
            );
        },
        async train(batch) {
          const summary = await trainBatch(o, ctx, batch, policy);
          policy = summary.checkpoint;
          summaries.push(summary);
        },
      },
    );
    await scheduler.run();
  } finally {
    await agent.close?.();
  }
  return summaries;
}

/** Step N of the asynchronous loop: build the batch, train from the previous step, publish version N. */
async function trainBatch(
  o: LoopOptions,
  ctx: StepContext,
  batch: Batch,
  checkpoint: string,
): Promise<StepSummary> {
  const { out, backend, publisher } = ctx;
  const n = batch.step;
  const dir = join(out, stepDirName(n));
  // an unfinished step is redone from its journalled batch; --resume keeps a finished training and export
  const kept = await keptStep(o, dir);
  await mkdirPrivate(dir);
  const started = new Date();
  const groupDirs = batch.groups.map((g) => join(out, LOOP_FILES.groups, groupDirName(g.group)));
  const s = batch.staleness;
  log.info(
    `step ${n}/${o.steps}: ${plural(batch.groups.length, 'group')} trained by version ${n - 1} ` +
      `(staleness max ${s.max}, mean ${s.mean.toFixed(2)}; ${s.carried} carried, ${s.dropped} dropped)`,
  );
  const traj = join(dir, LOOP_FILES.trajectories);
  const stats = await runBuild({
    inputs: groupDirs.map((d) => join(d, EVAL_FILES.captures)),
    outputFile: traj,
    groupBy: 'meta:loop_group',
    quiet: true,
    ...(o.overlong ? { overlong: o.overlong.mode, overlongBuffer: o.overlong.buffer } : {}),
  });
  await writeFile(join(dir, LOOP_FILES.buildStats), `${JSON.stringify(stats, null, 2)}\n`, {
    mode: PRIVATE_FILE,
  });
  stopped(o, `step ${n} stopped after its build`);
  if (stats.trajectories_written === 0)
    throw new PolarError(
      `step ${n}: no trajectories were built from the rollouts (see ${dir}/build-stats.json)`,
    );
  const trained = kept.trained
    ? keptTraining(kept.trained, join(dir, LOOP_FILES.train), trainSteps(ctx.reporter))
    : await runTrain(trainRequest(o, ctx, batch, traj, checkpoint));
  stopped(o, `step ${n} stopped after its training`);
  if (o.crashAfter?.step === n && o.crashAfter.phase === 'train')
    throw new PolarError(`simulated crash after train of step ${n}`);
  if (!trained.checkpoint) throw new PolarError(`step ${n}: training wrote no checkpoint`);
  await publish(publisher, trained.checkpoint, join(dir, LOOP_FILES.onnx), o, n);
  backend.policyVersion = n;

  let heldoutRun: EvalOutcome | null = null;
  if (o.evalSet && ctx.evalSet.length && o.evalEvery > 0 && n % o.evalEvery === 0) {
    const meta = { policy: `step-${n}`, loop_step: String(n), heldout: '1' };
    const to = join(dir, LOOP_FILES.heldout);
    heldoutRun = await evaluate(o, backend, ctx.evalSet, 1, to, o.evalSet, meta, kept.resume);
    stopped(o, `step ${n} stopped during its held-out evaluation`);
  }
  const heldout = heldoutRun ? { pass_at_1: heldoutRun.report.pass_at_1.mean } : null;
  const rollouts = await batchOutcome(batch, groupDirs, o.groupSize);
  const summary: StepSummary = {
    step: n,
    status: 'done',
    started_at: started.toISOString(),
    ended_at: new Date().toISOString(),
    policy: `step-${n - 1}`,
    checkpoint: trained.checkpoint,
    tasks: batch.groups.map((g) => g.task),
    rollouts: { pass_at_1: rollouts.report.pass_at_1.mean, samples: rollouts.report.total },
    heldout,
    trajectories: stats.trajectories_written,
    trainable_tokens: stats.tokens_trainable,
    overlong: {
      calls: stats.calls_length,
      traces: stats.traces_overlong,
      masked: stats.overlong_masked,
      penalised: stats.overlong_penalised,
    },
    staleness: batch.staleness,
    groups: batch.groups.map((g) => ({
      group: g.group,
      task: g.task,
      meant_for: g.meantFor,
      policy_versions: g.versions,
    })),
  };
  // the same health and figures as a strict step, each group of the batch a GRPO group of its own
  summary.health = observeStep(ctx.reporter, n, {
    record: summary,
    rollouts,
    stats,
    heldout: heldoutRun,
    groupOf: rollouts.groupOf,
  });
  await writeFile(join(dir, LOOP_FILES.step), `${JSON.stringify(summary, null, 2)}\n`, {
    mode: PRIVATE_FILE,
  });
  log.info(
    `step ${n} done: pass@1 ${rate(summary.rollouts.pass_at_1)} on rollouts${heldout ? `, held-out ${rate(heldout.pass_at_1)}` : ''}`,
  );
  return summary;
}

/**
 * Step N's training: one optimiser step over the batch, continuing the previous step's run, with the
 * trainer's staleness check (policy_version N-1, max_staleness K) and its step events to --report-to.
 */
export function trainRequest(
  o: LoopOptions,
  ctx: Pick<StepContext, 'out' | 'reporter'>,
  batch: Pick<Batch, 'step' | 'groups'>,
  traj: string,
  checkpoint: string,
): TrainRequest {
  const n = batch.step;
  const resume = previousTrainRun(ctx.out, n);
  return {
    allowZeroAdvantage: true,
    trajectories: traj,
    out: join(ctx.out, stepDirName(n), LOOP_FILES.train),
    configFile: o.trainConfig,
    ...(resume ? { resume } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
    // the trainer's optimiser steps to --report-to (one per loop step, so the numbers are the loop's)
    onStep: trainSteps(ctx.reporter),
    sampledBy: [o.backend.model],
    flags: {
      ...o.trainFlags,
      ...(resume ? {} : { model: checkpoint }),
      batch_rollouts: batch.groups.length * o.groupSize,
      epochs: 1,
      // the trainer refuses any trajectory more than K versions behind the policy it trains
      policy_version: n - 1,
      max_staleness: o.maxStaleness ?? 0,
    },
  };
}

/**
 * The batch's graded samples as one evaluation, as a strict step's eval/ gives them: every group's
 * results.jsonl, a report over them all (its dataset, agent, model and runtime from the first group's
 * report.json), and each result's GRPO group (two groups of a batch can share a task).
 */
export async function batchOutcome(
  batch: Pick<Batch, 'groups'>,
  dirs: string[],
  groupSize: number,
): Promise<EvalOutcome & { groupOf: (r: ResultLine) => string }> {
  const results: ResultLine[] = [];
  const group = new Map<ResultLine, string>();
  let context: Report | null = null;
  for (const [i, d] of dirs.entries()) {
    if (!context) context = readRunReport(join(d, EVAL_FILES.report));
    for (const r of (await readResults(join(d, EVAL_FILES.results))).values()) {
      results.push(r);
      group.set(r, String(batch.groups[i]!.group));
    }
  }
  const report = buildReport(results, {
    dataset: context?.dataset ?? '',
    agent: context?.agent ?? '',
    model: context?.model ?? '',
    runtime: context?.runtime ?? '',
    instances: [...new Set(batch.groups.map((g) => g.task))],
    samples: groupSize,
  });
  return {
    report,
    results,
    interrupted: false,
    groupOf: (r) => group.get(r) ?? r.instance_id,
  };
}
