/** `polar eval`: typed flags in, the evaluation set up and run, the report printed, the exit code out. */
import { resolve } from 'node:path';
import { ensureBackendReady } from '../backends/wait.ts';
import { EXIT, InputError, PolarError, UsageError } from '../errors.ts';
import { HARNESS_NAMES } from '../harnesses/types.ts';
import { backendOptions, backendUrls } from '../options/backend.ts';
import { type ReportSetup, reportSetup } from '../options/report.ts';
import { type AgentName, BUILTIN_AGENTS, isHarness } from '../rollout/agent-names.ts';
import { loadDataset, type SweInstance, selectInstances } from '../rollout/dataset.ts';
import { runtimeSetup } from '../rollout/flags.ts';
import { type RewardSetup, rewardSetup } from '../rollout/judge/setup.ts';
import { checkOut } from '../rollout/run/out.ts';
import { formatReport } from '../rollout/run/report.ts';
import { type EvalOutcome, runEval } from '../rollout/run/run.ts';
import { checkSettings, type RunSettings } from '../rollout/run/settings.ts';
import {
  checkAgentSetup,
  checkPredictions,
  type EvaluationSetup,
  setupEvaluation,
} from '../rollout/setup.ts';
import { runSwebenchGrader } from '../rollout/swebench.ts';
import { onStopSignals } from '../util/interrupt.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import type { EvalFlags } from './flags.ts';
import { runSettings } from './settings.ts';

/**
 * The agent of `polar eval`: --agent, or --harness, its old name for a harness (still works for a
 * release, with a warning).
 */
function evalAgent(f: EvalFlags, warn: (message: string) => void): AgentName {
  if (f.agent && f.harness && f.agent !== f.harness) {
    throw new UsageError(
      `--agent ${f.agent} and --harness ${f.harness} name two different agents`,
      isHarness(f.agent) ? 'give one of them' : `drop --harness: --agent ${f.agent} runs no harness`,
    );
  }
  if (f.harness) warn('--harness of polar eval is now --agent (the old name goes in the next release)');
  const agent = f.agent ?? f.harness;
  if (!agent)
    throw new UsageError(
      `give --agent: a harness (${HARNESS_NAMES.join('|')}) or ${BUILTIN_AGENTS.join('|')}`,
    );
  return agent;
}

/** The agent and runtime of `polar eval` from its flags (the same EvaluationSetup polar loop builds). */
export function evaluationSetup(
  f: EvalFlags,
  warn: (message: string) => void = (m) => log.warn(m),
): EvaluationSetup {
  const agent = evalAgent(f, warn);
  return {
    agent: {
      agent,
      ...(f.agentCmd ? { agentCmd: f.agentCmd } : {}),
      ...(f.predictions ? { predictions: f.predictions } : {}),
      ...(f.promptTemplate ? { promptTemplate: f.promptTemplate } : {}),
      ...(f.piApi ? { piApi: f.piApi } : {}),
      ...(f.passEnv?.length ? { passEnv: f.passEnv } : {}),
      ...(isHarness(agent) ? { backend: backendOptions(f) } : {}),
      ...(isHarness(agent) && backendUrls(f).length > 1 ? { backendUrls: backendUrls(f) } : {}),
    },
    runtime: runtimeSetup(f),
  };
}

export async function evalCommand(f: EvalFlags, context: { argv?: string[] } = {}): Promise<number> {
  if (f.quiet) log.configure({ quiet: true });
  if (f.regrade) return (await import('./regrade.ts')).regradeCommand(f);
  if (f.merge) return (await import('../rollout/executors/merge.ts')).mergeCommand(f);
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
  const { predictions } = await checkAgentSetup(setup.agent);
  if (predictions && f.predictions)
    checkPredictions(predictions, f.predictions, { all, selected: instances });
  // a harness's servers are checked once per run, before any sample spends harness time (or a job is queued)
  if (setup.agent.backend)
    for (const url of setup.agent.backendUrls ?? [undefined])
      await ensureBackendReady(url ? { ...setup.agent.backend, url } : setup.agent.backend);
  if (f.cluster?.engine === 'slurm')
    return (await import('../rollout/executors/slurm.ts')).slurmEval(
      f,
      instances,
      context.argv ?? process.argv,
    );
  // the tracking packages are checked before any sample runs; the writer opens once the report is made
  // (the run's folder must be empty or --resume'd until then)
  if (tracking) await (await import('../train/tracking/reporter.ts')).checkReporting(tracking);

  // SIGINT, SIGTERM and SIGHUP alike: no new sample starts, the running ones are set aside for --resume
  const interrupt = onStopSignals('stopping the running samples (run again with --resume to continue)');
  let outcome: EvalOutcome;
  try {
    outcome = f.cluster
      ? await (await import('./cluster.ts')).rayEval(f, setup, instances, {
          argv: context.argv ?? process.argv,
          label: agentLabel(setup.agent, predictions?.model),
          signal: interrupt.signal,
          settings,
        })
      : await localEval(f, setup, instances, interrupt.signal, settings, rewards);
  } finally {
    interrupt.dispose();
  }
  if (tracking && !outcome.interrupted) await reportEval(f, tracking, outcome);
  return finish(f, outcome, interrupt.exitCode);
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

/**
 * The judge and the --reward of a run (src/rollout/judge/setup.ts); null when the run's one grader gives the
 * reward as it always has. Not yet on a cluster: the judge runs where the samples are recorded.
 */
export function evalRewards(f: EvalFlags): RewardSetup | null {
  const setup = rewardSetup(f, { groups: true, command: 'eval' });
  if (setup.judge === null && f.reward === undefined) return null;
  if (f.cluster)
    throw new UsageError(
      `--cluster with ${setup.judge ? 'a judge' : '--reward'}: not supported yet`,
      'run the judged evaluation on one machine, or grade the cluster run with --grader polar',
    );
  return setup;
}

/** The name and model a run's report and predictions give its agent (as the agent classes name them). */
export function agentLabel(setup: EvaluationSetup['agent'], predictionsModel?: string) {
  if (setup.agent === 'predictions') return { name: 'predictions', modelName: predictionsModel ?? '' };
  if (isHarness(setup.agent)) return { name: setup.agent, modelName: setup.backend?.model ?? '' };
  return { name: setup.agent, modelName: setup.agent };
}

/** The samples on this machine: the runtime and agent made here, a pool of --concurrency. */
async function localEval(
  f: EvalFlags,
  setup: EvaluationSetup,
  instances: SweInstance[],
  signal: AbortSignal,
  settings: RunSettings,
  rewards: RewardSetup | null,
): Promise<EvalOutcome> {
  const { agent, runtime } = await setupEvaluation(setup);
  try {
    await runtime.check(instances);
    log.info(
      `${plural(instances.length, 'instance')} x ${plural(f.samples, 'sample')}, agent ${agent.name}, runtime ${runtime.kind}, concurrency ${f.concurrency}`,
    );
    const outcome = await runEval({
      instances,
      agent,
      runtime,
      out: f.out,
      samples: f.samples,
      ...(f.sampleIndex !== undefined ? { sampleIndex: f.sampleIndex } : {}),
      ...(f.clusterTag ? { clusterTag: f.clusterTag } : {}),
      ...(f.sessionMeta
        ? { meta: Object.fromEntries(Object.entries(f.sessionMeta).map(([k, v]) => [k, String(v)])) }
        : {}),
      concurrency: f.concurrency,
      agentTimeoutMs: f.agentTimeout,
      testTimeoutMs: f.testTimeout,
      resume: Boolean(f.resume),
      overwrite: Boolean(f.overwrite),
      dataset: f.dataset,
      grade: f.grader.kind === 'swebench' ? 'none' : 'polar',
      ...(f.grader.kind === 'verifier' ? { verifier: f.grader.command } : {}),
      gradeEmpty: Boolean(f.gradeEmptyPatches),
      rejectTampering: Boolean(f.rejectTestTampering),
      progress: !f.quiet,
      signal,
      settings,
      ...(rewards ? { rewards } : {}),
    });
    if (f.grader.kind !== 'swebench' || outcome.interrupted) return outcome;
    return await runSwebenchGrader(outcome, {
      out: f.out,
      dataset: f.dataset,
      concurrency: f.concurrency,
      split: f.split,
      testTimeoutMs: f.testTimeout,
      instances,
      agent,
      runtime,
      samples: f.samples,
    });
  } finally {
    await agent.close?.();
  }
}

/** The report printed, the run's exit code (errors, --fail-under). */
export function finish(
  f: Pick<EvalFlags, 'json' | 'out' | 'failUnder'>,
  outcome: EvalOutcome,
  /** 128 + the stopping signal's number (0: none came) */
  stoppedCode = 0,
): number {
  const { report } = outcome;
  if (f.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else process.stdout.write(`${formatReport(report)}\n`);
  log.info(`wrote ${resolve(f.out)}/{results.jsonl,predictions.jsonl,report.json}`);
  if (outcome.interrupted) return stoppedCode || EXIT.interrupted;
  if (report.total > 0 && report.counts.error === report.total) {
    throw new PolarError(`the evaluation failed: all ${plural(report.total, 'sample')} ended in an error`, {
      exitCode: EXIT.failure,
      hint: `first error: ${report.errors[0]?.reason ?? 'unknown'}`,
    });
  }
  if (report.counts.error > 0)
    log.warn(
      `${plural(report.counts.error, 'sample')} ended in an error and ${report.counts.error === 1 ? 'has' : 'have'} no reward (see report.json; --resume runs them again)`,
    );
  const mean = report.pass_at_1.mean;
  if (f.failUnder !== undefined && (mean === null || mean < f.failUnder)) {
    throw new PolarError(`pass@1 ${mean?.toFixed(4) ?? 'n/a'} is below --fail-under ${f.failUnder}`, {
      exitCode: EXIT.belowThreshold,
    });
  }
  return EXIT.ok;
}

/** The dataset and the instances the flags select; an empty dataset or selection names its cause. */
export async function selectedInstances(
  f: EvalFlags,
): Promise<{ all: SweInstance[]; instances: SweInstance[] }> {
  const all = await loadDataset(f.dataset, {
    split: f.split,
    verifier: f.grader.kind === 'verifier' || f.grader.kind === 'judge',
  });
  if (all.length === 0)
    throw new InputError(
      f.dataset,
      undefined,
      undefined,
      'holds no instances',
      'give a dataset with SWE-bench rows',
    );
  const instances = selectInstances(all, { instances: f.instances, limit: f.limit, shard: f.shard });
  if (instances.length === 0) {
    const given = [
      f.instances ? `--instances ${f.instances.join(',')}` : null,
      f.shard ? `--shard ${f.shard.index}/${f.shard.count}` : null,
      f.limit !== undefined ? `--limit ${f.limit}` : null,
    ].filter((x): x is string => x !== null);
    throw new UsageError(
      `no instances selected from the ${plural(all.length, 'instance')} of ${f.dataset}`,
      given.length ? `check ${given.join(', ')}` : undefined,
    );
  }
  return { all, instances };
}
