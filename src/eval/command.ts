/**
 * `polar eval`: typed flags in, a rollout job out of them (src/eval/job.ts), run by the executor --cluster
 * chooses (src/rollout/executors/: this machine's pool, Ray, Slurm), the report printed, the exit code
 * out. `polar job FILE|-` runs a job another polar wrote (a cluster node's share, a loop step on a
 * cluster).
 */
import { resolve } from 'node:path';
import { ensureBackendReady } from '../backends/wait.ts';
import { EXIT, UsageError } from '../errors.ts';
import { type ReportSetup, reportSetup } from '../options/report.ts';
import type { SweInstance } from '../rollout/dataset.ts';
import { ensureDatasetRepos } from '../rollout/dataset-repos.ts';
import { agentLabel, jobInstances, jobSetup, type RolloutJob, readJob } from '../rollout/executors/job.ts';
import type { RewardSetup } from '../rollout/judge/setup.ts';
import { checkOut } from '../rollout/run/out.ts';
import type { EvalOutcome } from '../rollout/run/run.ts';
import { checkSettings } from '../rollout/run/settings.ts';
import { checkAgentSetup, checkPredictions } from '../rollout/setup.ts';
import { onStopSignals } from '../util/interrupt.ts';
import { log } from '../util/log.ts';
import { finish } from './finish.ts';
import type { EvalFlags } from './flags.ts';
import { evalJob, evalRewards, evaluationSetup, selectedInstances } from './job.ts';
import { runSettings } from './settings.ts';

export async function evalCommand(f: EvalFlags): Promise<number> {
  if (f.quiet) log.configure({ quiet: true });
  if (f.regrade) return (await import('./regrade.ts')).regradeCommand(f);
  if (f.merge) return (await import('./merge.ts')).mergeCommand(f);
  // every flag and input is checked before anything is made or run (and before the runtime's warnings)
  const tracking = reportSetup(f, f.out);
  // the shards' results are merged by a Slurm job of its own, which starts no tracking writer
  if (tracking && f.cluster?.engine === 'slurm')
    throw new UsageError(
      '--report-to is not supported with --cluster slurm yet: the merge job that makes report.json starts no tracking writer',
      'drop --report-to (the merged report.json holds the figures), or run the eval with --cluster ray or without --cluster',
    );
  const setup = evaluationSetup(f);
  const rewards = evalRewards(f);
  checkOut(f.out, f);
  const settings = runSettings(f);
  checkSettings(f.out, settings, Boolean(f.resume));
  const { all, instances } = await selectedInstances(f);
  const job = evalJob(f, setup, instances, settings);
  const ran = await executeJob(job, { all, instances, tracking, rewards });
  if (!ran) return EXIT.interrupted;
  if (tracking && !ran.outcome.interrupted) await reportEval(f, tracking, ran.outcome);
  return finish(f, ran.outcome, ran.stoppedCode);
}

/**
 * `polar job FILE|-` (commands/job.ts): a job another polar wrote, checked as eval's flags would be, then
 * run; its report printed (a merge job's as JSON), the exit code as for any run.
 */
export async function jobCommand(
  path: string,
  { clusterTag, quiet }: { clusterTag?: Record<string, unknown>; quiet?: boolean } = {},
): Promise<number> {
  if (quiet) log.configure({ quiet: true });
  const job = readJob(path);
  if (job.merge) {
    const { mergeRuns } = await import('../rollout/executors/merge.ts');
    const { instances } = await jobInstances(job);
    const outcome = await mergeRuns(job.merge, { ...job, instances });
    return finish({ json: true, out: job.out }, outcome);
  }
  checkOut(job.out, job);
  if (job.settings) checkSettings(job.out, job.settings, job.resume);
  const { all, instances } = await jobInstances(job);
  const ran = await executeJob(job, { all, instances, ...(clusterTag ? { clusterTag } : {}) });
  if (!ran) return EXIT.interrupted;
  return finish({ out: job.out }, ran.outcome, ran.stoppedCode);
}

interface JobContext {
  /** the dataset's instances, and those the job runs */
  all: SweInstance[];
  instances: SweInstance[];
  tracking?: ReportSetup | null;
  rewards?: RewardSetup | null;
  /** where this share of a cluster run runs (a Slurm shard's node and job): each result's `cluster` */
  clusterTag?: Record<string, unknown> | undefined;
}

/**
 * The agent's set-up and the servers checked, then the job run by its executor; null when a Slurm run was
 * interrupted here while its jobs go on.
 */
async function executeJob(
  job: RolloutJob,
  { all, instances, tracking, rewards, clusterTag }: JobContext,
): Promise<{ outcome: EvalOutcome; stoppedCode: number } | null> {
  const setup = jobSetup(job);
  // repositories a local dataset ships as sources are made on first use (a node's share makes its own)
  if (setup.runtime.kind === 'sandbox' || setup.runtime.kind === 'local')
    ensureDatasetRepos(job.dataset, setup.runtime.repos, instances);
  const { predictions } = await checkAgentSetup(setup.agent);
  if (predictions && setup.agent.predictions)
    checkPredictions(predictions, setup.agent.predictions, { all, selected: instances });
  // a harness's servers are checked once per run, before any sample spends harness time (or a job is queued)
  if (setup.agent.backend)
    for (const url of setup.agent.backendUrls ?? [undefined])
      await ensureBackendReady(url ? { ...setup.agent.backend, url } : setup.agent.backend);
  const { executor } = job;
  if (executor.kind === 'slurm') {
    const { runOnSlurm } = await import('../rollout/executors/slurm.ts');
    const outcome = await runOnSlurm({ ...job, executor }, instances);
    return outcome ? { outcome, stoppedCode: EXIT.ok } : null;
  }
  // the tracking packages are checked before any sample runs; the writer opens once the report is made
  // (the run's folder must be empty or --resume'd until then)
  if (tracking) await (await import('../train/tracking/reporter.ts')).checkReporting(tracking);

  // SIGINT, SIGTERM and SIGHUP alike: no new sample starts, the running ones are set aside for --resume
  const interrupt = onStopSignals('stopping the running samples (run again with --resume to continue)');
  let outcome: EvalOutcome;
  try {
    outcome =
      executor.kind === 'ray'
        ? await (await import('../rollout/executors/ray.ts')).runOnRay({ ...job, executor }, instances, {
            label: agentLabel(setup.agent, predictions?.model),
            signal: interrupt.signal,
          })
        : await (await import('../rollout/executors/local.ts')).runLocal(job, instances, {
            signal: interrupt.signal,
            ...(rewards ? { rewards } : {}),
            ...(clusterTag ? { clusterTag } : {}),
          });
  } finally {
    interrupt.dispose();
  }
  return { outcome, stoppedCode: interrupt.exitCode };
}

/** --report-to: the report's figures, at step 0 of the eval axis, into the run's one writer. */
async function reportEval(f: EvalFlags, tracking: ReportSetup, outcome: EvalOutcome): Promise<void> {
  const { openReporter } = await import('../train/tracking/reporter.ts');
  const { evalFigures } = await import('../rollout/run/figures.ts');
  const reporter = await openReporter(tracking, {
    out: resolve(f.out),
    resume: Boolean(f.resume),
    purgeStep: 0,
    config: { command: 'eval', dataset: f.dataset, samples: f.samples, model: f.model ?? null },
  });
  try {
    reporter.log('eval', 0, evalFigures('eval', outcome.report, outcome.results));
  } finally {
    await reporter.close();
  }
}
