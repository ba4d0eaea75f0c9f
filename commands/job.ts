import { type Command, Option } from 'commander';
import { jsonObject } from '../src/options/parsers.ts';
import { QUIET_FLAG, type Report, toOption } from './flags.ts';

/**
 * `polar job FILE|-` (hidden): a rollout job another polar wrote (src/rollout/executors/job.ts), run on
 * this machine as `polar eval` runs its own: a cluster node's share of a run (a Ray task's sample, a
 * Slurm shard, the Slurm merge), a loop step's rollouts on a cluster. The job carries the whole run;
 * nothing of eval's flags reaches a node.
 */
export function defineJob(program: Command, report: Report): void {
  program
    .command('job', { hidden: true })
    .description(
      "run a rollout job another polar wrote (a cluster node's share of a run, a loop step on a cluster)",
    )
    .argument('<file>', 'the job (JSON); - reads it from stdin')
    .addOption(
      new Option(
        '--cluster-tag <json>',
        "where this share of a cluster run ran: each result line's `cluster`",
      ).argParser(jsonObject),
    )
    .addOption(toOption(QUIET_FLAG))
    .addHelpText(
      'after',
      `
Examples:
  polar job runs/eval-1/.cluster/slurm/shard-2.job.json --cluster-tag '{"engine":"slurm","shard":2}'
  polar job - --quiet < job.json     # a Ray task's sample, a loop step's rollouts (docs/cluster.md)`,
    )
    .action(async (file: string, flags: { clusterTag?: Record<string, unknown>; quiet?: boolean }) => {
      const { jobCommand } = await import('../src/eval/command.ts');
      report(await jobCommand(file, flags));
    });
}
