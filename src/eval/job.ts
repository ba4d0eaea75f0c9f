/**
 * `polar eval`'s flags as the engine's rollout job (src/rollout/executors/job.ts): the agent and runtime
 * (the same EvaluationSetup polar loop builds), the selected instances, the grading, the time limits,
 * the run folder, and the executor --cluster chooses. Past this file nothing reads eval's flags.
 */
import { InputError, UsageError } from '../errors.ts';
import { backendOptions, backendUrls } from '../options/backend.ts';
import { recordOf } from '../options/config.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { type AgentName, agentOf, isHarness } from '../rollout/agent-names.ts';
import { loadDataset, type SweInstance, selectInstances } from '../rollout/dataset.ts';
import { jobOfSetup, ROLLOUT_JOB_VERSION, type RolloutJob } from '../rollout/executors/job.ts';
import { clusterExecutor, runtimeSetup } from '../rollout/flags.ts';
import { type RewardSetup, rewardSetup } from '../rollout/judge/setup.ts';
import type { RunSettings } from '../rollout/run/settings.ts';
import type { EvaluationSetup } from '../rollout/setup.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import type { EvalFlags } from './flags.ts';

/** The agent of `polar eval`: --agent, or --harness, its old name for a harness (agentOf). */
function evalAgent(f: EvalFlags, warn: (message: string) => void): AgentName {
  return agentOf(f, 'eval', warn);
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
    runtime: runtimeSetup(f, f.dataset),
  };
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

/** The rollout job of `polar eval`'s flags, its set-up and selection made and checked. */
export function evalJob(
  f: EvalFlags,
  setup: EvaluationSetup,
  instances: SweInstance[],
  settings: RunSettings,
): RolloutJob {
  return {
    v: ROLLOUT_JOB_VERSION,
    dataset: f.dataset,
    split: f.split,
    instances: instances.map((i) => i.instance_id),
    samples: f.samples,
    setup: jobOfSetup(setup, { ...(f.apiKey ? { apiKey: f.apiKey } : {}) }),
    grader: f.grader,
    gradeEmpty: Boolean(f.gradeEmptyPatches),
    rejectTampering: f.rejectTestTampering ?? DEFAULTS.evalRejectsTampering.value,
    agentTimeoutMs: f.agentTimeout,
    testTimeoutMs: f.testTimeout,
    concurrency: f.concurrency,
    out: f.out,
    resume: Boolean(f.resume),
    overwrite: Boolean(f.overwrite),
    settings,
    // run.json's `config`: given back as --config, the run again (not its --resume, --overwrite, ...)
    ...(f.given ? { config: recordOf(f.given, ['resume', 'overwrite', 'regrade', 'merge']) } : {}),
    executor: clusterExecutor(f),
  };
}
