import type { Command } from 'commander';
import { addBackendFlags, addRolloutFlags } from './shared.ts';

export function defineEval(program: Command): void {
  const cmd = program
    .command('eval')
    .description('score an agent on a SWE-bench-style dataset (pass@1), or produce graded training rollouts')
    .requiredOption(
      '--dataset <path|hub-id>',
      '.jsonl, .json or .parquet in the SWE-bench schema, or a hub id',
    )
    .option('--split <name>', 'split of a hub dataset', 'test')
    .option('--harness <name>', 'harness to run under polar capture: codex, claude, pi, generic')
    .option('--agent <name>', 'gold | empty | predictions, or a harness name (same as --harness)')
    .option('--agent-cmd <cmd>', 'command for --harness generic; {prompt} is replaced by the prompt')
    .option('--predictions <file>', 'predictions file for --agent predictions')
    .option('--prompt-template <file>', 'prompt template ({{problem_statement}}, {{workdir}}, {{repo}})')
    .option('--samples <n>', 'samples per instance', '1')
    .option('--concurrency <n>', 'samples run at once', '4')
    .option('--out <dir>', 'output folder', 'runs/eval')
    .option('--instances <ids>', 'comma-separated instance ids')
    .option('--limit <n>', 'first n instances (after --instances and --shard)')
    .option('--shard <i/n>', 'run the i-th of n shards (1-based, round robin)')
    .option('--resume', 'skip samples already graded in --out')
    .option('--regrade', 'grade the test logs of the run in --out again, rewriting results and report')
    .option('--grader <kind>', 'polar, or swebench (the official harness, when installed)', 'polar')
    .option('--json', 'print the report as JSON on stdout')
    .option('--fail-under <fraction>', 'exit 5 when pass@1 is below this')
    .option('--grade-empty-patches', 'run the tests for empty patches too instead of scoring them 0 outright')
    .option('--keep-envs', 'keep the local runtime temp dirs (debugging)')
    .option('-q, --quiet', 'no progress output');
  addBackendFlags(addRolloutFlags(cmd)).action(async (options) => {
    const { evalCommand } = await import('../src/eval/command.ts');
    process.exitCode = await evalCommand(options);
  });
}
