import type { Command } from 'commander';
import { addBackendFlags } from './shared.ts';

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
    .option(
      '--pi-api <api>',
      'the wire API Pi uses: openai-completions | openai-responses | anthropic-messages',
    )
    .option('--agent-cmd <cmd>', 'command for --harness generic; {prompt} is replaced by the prompt')
    .option('--predictions <file>', 'predictions file for --agent predictions')
    .option('--prompt-template <file>', 'prompt template ({{problem_statement}}, {{workdir}}, {{repo}})')
    .option('--runtime <kind>', 'local, docker or podman', 'docker')
    .option('--repos <dir>', 'local runtime: DIR/<owner>/<name> git repositories', 'fixtures/swe/repos')
    .option('--image <template>', 'container image override ({instance_id} is replaced)')
    .option('--network <name>', 'container network (default host, so the capture proxy is reachable)')
    .option('--samples <n>', 'samples per instance', '1')
    .option('--concurrency <n>', 'samples run at once', '4')
    .option('--out <dir>', 'output folder', 'runs/eval')
    .option('--instances <ids>', 'comma-separated instance ids')
    .option('--limit <n>', 'first n instances (after --instances and --shard)')
    .option('--shard <i/n>', 'run the i-th of n shards (1-based, round robin)')
    .option('--agent-timeout <s>', 'seconds before the agent is killed', '1800')
    .option('--test-timeout <s>', 'seconds before the tests are killed', '1800')
    .option('--resume', 'skip samples already graded in --out')
    .option('--allow-unsandboxed', 'allow a harness agent with --runtime local')
    .option('--grader <kind>', 'polar, or swebench (the official harness, when installed)', 'polar')
    .option('--json', 'print the report as JSON on stdout')
    .option('--fail-under <fraction>', 'exit 5 when pass@1 is below this')
    .option('--grade-empty-patches', 'run the tests for empty patches too instead of scoring them 0 outright')
    .option('--keep-envs', 'keep the local runtime temp dirs (debugging)')
    .option('-q, --quiet', 'no progress output');
  addBackendFlags(cmd).action(async (options) => {
    const { evalCommand } = await import('../src/eval/command.ts');
    process.exitCode = await evalCommand(options);
  });
}
