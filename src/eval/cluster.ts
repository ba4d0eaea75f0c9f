/** `polar eval --cluster ray[=ADDRESS]`: the run folder written here, its samples run on the cluster's nodes. */
import { resolve } from 'node:path';
import { backendUrls } from '../options/backend.ts';
import type { SweInstance } from '../rollout/dataset.ts';
import { nodeArgv, wordsAfter } from '../rollout/executors/argv.ts';
import { rayExecutor } from '../rollout/executors/ray.ts';
import { type EvalOutcome, runEvalWith } from '../rollout/run/run.ts';
import type { RunSettings } from '../rollout/run/settings.ts';
import type { EvaluationSetup } from '../rollout/setup.ts';
import { nodeEnv, polarCommand } from '../train/cluster/polar.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import type { EvalFlags } from './flags.ts';

export async function rayEval(
  f: EvalFlags,
  setup: EvaluationSetup,
  instances: SweInstance[],
  context: {
    argv: string[];
    label: { name: string; modelName: string };
    signal: AbortSignal;
    /** the settings that decide the results, kept in run.json (--resume refuses others) */
    settings?: RunSettings;
  },
): Promise<EvalOutcome> {
  const address = f.cluster?.address ?? process.env.RAY_ADDRESS ?? 'auto';
  log.info(
    `${plural(instances.length, 'instance')} x ${plural(f.samples, 'sample')}, agent ${context.label.name}, runtime ${setup.runtime.kind}, on the Ray cluster at ${address}`,
  );
  const out = resolve(f.out);
  const execute = rayExecutor({
    address,
    argv: nodeArgv(wordsAfter(context.argv, 'eval')),
    polar: polarCommand(f.clusterPolar),
    cwd: process.cwd(),
    cpus: f.clusterCpus,
    memoryBytes: f.clusterMemory,
    ...(f.clusterShared ? { shared: resolve(f.clusterShared) } : {}),
    retries: f.clusterRetries,
    // servers are given to each sample by the driver, one per rollout (the least loaded)
    backendUrls: setup.agent.backend ? backendUrls(f) : [],
    out,
    agent: context.label,
    env: nodeEnv(),
    signal: context.signal,
  });
  return runEvalWith(
    {
      instances,
      out,
      samples: f.samples,
      resume: Boolean(f.resume),
      overwrite: Boolean(f.overwrite),
      dataset: f.dataset,
      progress: !f.quiet,
      agent: context.label,
      runtime: { kind: setup.runtime.kind },
      ...(context.settings ? { settings: context.settings } : {}),
    },
    execute,
  );
}
