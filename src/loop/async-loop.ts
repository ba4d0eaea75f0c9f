/**
 * `polar loop --max-staleness K` (K >= 1): the loop's driver of the staleness scheduler (src/loop/async.ts).
 * Each GRPO group is a polar eval run of its own, run/groups/g-NNNNNN/ (captures, results.jsonl,
 * report.json), its samples run in the scheduler's rollout slots; step N builds its batch of groups into
 * run/step-N/traj.jsonl (one GRPO group per loop group: --group-by meta:loop_group), trains from the
 * previous step's run with the trainer's staleness check (policy_version, max_staleness), publishes
 * version N, tells the backend (each later call record's policy_version), runs the held-out eval on its
 * steps, and writes step.json last with the batch's staleness counts. run/schedule.jsonl is the journal
 * --resume replays. The K = 0 loop (src/loop/loop.ts) is untouched by this file.
 */
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { runBuild } from '../build/command.ts';
import { PolarError } from '../errors.ts';
import { EVAL_FILES } from '../eval/files.ts';
import { localExecutor, runEvalWith } from '../eval/run.ts';
import type { SweInstance } from '../rollout/dataset.ts';
import { setupEvaluation } from '../rollout/setup.ts';
import { runTrain } from '../train/launch.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import { mkdirPrivate, PRIVATE_FILE } from '../util/private-files.ts';
import { type Batch, fileJournal, readJournal, StalenessScheduler } from './async.ts';
import { groupDirName, LOOP_FILES, type StepSummary, stepDirName } from './files.ts';
import { type LoopOptions, rate, type StepContext, tasksForStep } from './loop.ts';
import { evaluate, previousTrainRun, publish, stopped } from './phases.ts';

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
            ...(o.rejectTestTampering ? { rejectTampering: true } : {}),
            ...(o.verifier ? { verifier: o.verifier } : {}),
            signal: slots.signal,
          };
          const local = localExecutor(options);
          const r = await runEvalWith(options, async (jobs, io) => {
            const runs = await Promise.all(
              jobs.map((job) => slots.withSlot(job.sample, () => local([job], io))),
            );
            return { interrupted: runs.some((x) => x.interrupted) };
          });
          if (r.interrupted)
            throw slots.signal.reason ?? new PolarError(`group ${plan.group} was interrupted`);
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
  await rm(dir, { recursive: true, force: true }); // an unfinished step is redone from its journalled batch
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
    inputs: groupDirs,
    outputFile: traj,
    groupBy: 'meta:loop_group',
    quiet: true,
  });
  await writeFile(join(dir, LOOP_FILES.buildStats), `${JSON.stringify(stats, null, 2)}\n`, {
    mode: PRIVATE_FILE,
  });
  stopped(o, `step ${n} stopped after its build`);
  if (stats.trajectories_written === 0)
    throw new PolarError(
      `step ${n}: no trajectories were built from the rollouts (see ${dir}/build-stats.json)`,
    );
  const resume = previousTrainRun(out, n);
  const trained = await runTrain({
    allowZeroAdvantage: true,
    trajectories: traj,
    out: join(dir, LOOP_FILES.train),
    configFile: o.trainConfig,
    ...(resume ? { resume } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
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
  });
  stopped(o, `step ${n} stopped after its training`);
  if (o.crashAfter?.step === n && o.crashAfter.phase === 'train')
    throw new PolarError(`simulated crash after train of step ${n}`);
  if (!trained.checkpoint) throw new PolarError(`step ${n}: training wrote no checkpoint`);
  await publish(publisher, trained.checkpoint, join(dir, LOOP_FILES.onnx), o, n);
  backend.policyVersion = n;

  let heldout: StepSummary['heldout'] = null;
  if (o.evalSet && ctx.evalSet.length && o.evalEvery > 0 && n % o.evalEvery === 0) {
    const r = await evaluate(o, backend, ctx.evalSet, 1, join(dir, LOOP_FILES.heldout), o.evalSet, {
      policy: `step-${n}`,
      loop_step: String(n),
      heldout: '1',
    });
    stopped(o, `step ${n} stopped during its held-out evaluation`);
    heldout = { pass_at_1: r.report.pass_at_1.mean };
  }
  const rollouts = await batchReport(groupDirs);
  const summary: StepSummary = {
    step: n,
    status: 'done',
    started_at: started.toISOString(),
    ended_at: new Date().toISOString(),
    policy: `step-${n - 1}`,
    checkpoint: trained.checkpoint,
    tasks: batch.groups.map((g) => g.task),
    rollouts,
    heldout,
    trajectories: stats.trajectories_written,
    trainable_tokens: stats.tokens_trainable,
    staleness: batch.staleness,
    groups: batch.groups.map((g) => ({
      group: g.group,
      task: g.task,
      meant_for: g.meantFor,
      policy_versions: g.versions,
    })),
  };
  await writeFile(join(dir, LOOP_FILES.step), `${JSON.stringify(summary, null, 2)}\n`, {
    mode: PRIVATE_FILE,
  });
  log.info(
    `step ${n} done: pass@1 ${rate(rollouts.pass_at_1)} on rollouts${heldout ? `, held-out ${rate(heldout.pass_at_1)}` : ''}`,
  );
  return summary;
}

/** pass@1 over the batch's samples (each group's report.json: its mean and sample count). */
async function batchReport(dirs: string[]): Promise<StepSummary['rollouts']> {
  let sum = 0;
  let counted = 0;
  let samples = 0;
  for (const d of dirs) {
    const report = JSON.parse(await readFile(join(d, EVAL_FILES.report), 'utf8')) as {
      total: number;
      pass_at_1: { mean: number | null };
    };
    samples += report.total;
    if (report.pass_at_1.mean !== null) {
      sum += report.pass_at_1.mean;
      counted++;
    }
  }
  return { pass_at_1: counted ? sum / counted : null, samples };
}
