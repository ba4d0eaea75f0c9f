/**
 * The local executor: a job's samples on this machine, the runtime and agent made here, a pool of
 * `concurrency` samples at once (localExecutor in src/rollout/run/run.ts), then the official harness over
 * the run when the job's grader is swebench. What a cluster node runs for its share of a job, and what
 * `polar eval` runs without --cluster.
 */
import { log } from '../../util/log.ts';
import { plural } from '../../util/plural.ts';
import type { SweInstance } from '../dataset.ts';
import type { RewardSetup } from '../judge/setup.ts';
import { type EvalOutcome, runEval } from '../run/run.ts';
import { setupEvaluation } from '../setup.ts';
import { runSwebenchGrader } from '../swebench.ts';
import { jobSetup, type RolloutJob } from './job.ts';

export async function runLocal(
  job: RolloutJob,
  instances: SweInstance[],
  {
    signal,
    rewards,
    clusterTag,
  }: { signal: AbortSignal; rewards?: RewardSetup; clusterTag?: Record<string, unknown> },
): Promise<EvalOutcome> {
  const { agent, runtime } = await setupEvaluation(jobSetup(job));
  try {
    await runtime.check(instances);
    log.info(
      `${plural(instances.length, 'instance')} x ${plural(job.samples, 'sample')}, agent ${agent.name}, runtime ${runtime.kind}, concurrency ${job.concurrency}`,
    );
    const outcome = await runEval({
      instances,
      agent,
      runtime,
      out: job.out,
      samples: job.samples,
      ...(job.sampleIndex !== undefined ? { sampleIndex: job.sampleIndex } : {}),
      ...(clusterTag ? { clusterTag } : {}),
      ...(job.meta ? { meta: job.meta } : {}),
      concurrency: job.concurrency,
      agentTimeoutMs: job.agentTimeoutMs,
      testTimeoutMs: job.testTimeoutMs,
      resume: job.resume,
      overwrite: job.overwrite,
      dataset: job.dataset,
      grade: job.grader.kind === 'swebench' ? 'none' : 'polar',
      ...(job.grader.kind === 'verifier' ? { verifier: job.grader.command } : {}),
      gradeEmpty: job.gradeEmpty,
      rejectTampering: job.rejectTampering,
      progress: !log.quiet,
      signal,
      ...(job.settings ? { settings: job.settings } : {}),
      ...(job.config ? { config: job.config } : {}),
      ...(rewards ? { rewards } : {}),
    });
    if (job.grader.kind !== 'swebench' || outcome.interrupted) return outcome;
    return await runSwebenchGrader(outcome, {
      out: job.out,
      dataset: job.dataset,
      concurrency: job.concurrency,
      split: job.split,
      testTimeoutMs: job.testTimeoutMs,
      instances,
      agent,
      runtime,
      samples: job.samples,
    });
  } finally {
    await agent.close?.();
  }
}
