import { type Command, Option } from 'commander';
import type { RawBuildOptions } from '../src/build/command.ts';
import { DEFAULTS, UNPARSED_TOOL_CALL_MODES, withDefault } from '../src/options/defaults.ts';
import { oneOf } from '../src/options/parsers.ts';
import type { Report } from './shared.ts';

export function defineBuild(program: Command, report: Report): void {
  program
    .command('build')
    .description('rebuild captures into token-exact GRPO trajectories (docs/trajectory-format.md)')
    .argument('<inputs...>', 'capture files, directories (scanned for *.jsonl) or - for stdin')
    .option('-o, --output <file>', 'write trajectories to FILE (default: stdout)')
    .option('--format <format>', 'polar (trajectory records) or verl (one row per trace)', 'polar')
    .option('--rewards <file>', 'JSONL of {session, reward} or {task_id, sample, reward}')
    .option('--group-by <key>', 'GRPO groups: task_id, none, or meta:KEY of the session record', 'task_id')
    .option('--advantage <kind>', 'grpo, dr-grpo, rloo or none', 'grpo')
    .option('--drop-uniform-groups', 'drop groups whose rewards are all equal', false)
    .option('--max-trace-tokens <n>', 'longest trace kept (prompt + response tokens)')
    .addOption(new Option('--max-tokens <n>', 'deprecated: --max-trace-tokens').hideHelp())
    .option(
      '--overlong <mode>',
      'over --max-trace-tokens: truncate the trace, or drop the trajectory',
      'truncate',
    )
    .option('--exclude-kind <kinds>', 'drop traces of these kinds (root,compaction,subagent,divergence,side)')
    .option(
      '--require-token-exact',
      'drop sessions with any call lacking server token ids or logprobs',
      false,
    )
    .option('--skip-invalid', 'skip (and count) malformed or schema-invalid lines instead of failing', false)
    .option('--eot-id <ids>', 'end-of-turn token ids, comma-separated', '151645,151643')
    .option('--splice', 'also merge turns whose assistant part the chat template re-rendered', false)
    .addOption(
      withDefault(
        new Option(
          '--unparsed-tool-calls <mode>',
          'a trajectory holding a tool call the server did not parse: zero (reward 0, tokens trained), mask (its tokens not trained) or keep',
        ).argParser(oneOf(UNPARSED_TOOL_CALL_MODES)),
        DEFAULTS.unparsedToolCalls,
      ),
    )
    .option('--stats', 'print the report on stdout and write no trajectories', false)
    .option('--json', 'the report as JSON on stdout (with -o or --stats)', false)
    .option('-q, --quiet', 'no report on stderr (warnings still show)', false)
    .addHelpText(
      'after',
      `
Streams: trajectories go to stdout (or -o FILE); the report goes to stderr, or to stdout with --stats
or --json. A closed stdout (polar build ... | head) ends the build quietly with exit 0.

Examples:
  polar build runs/eval/captures -o traj.jsonl
  polar build runs/eval/captures --stats --json | jq .tokens_trainable
  polar build capture.jsonl --rewards rewards.jsonl --max-trace-tokens 32768 -o traj.jsonl`,
    )
    .action(async (inputs: string[], options: RawBuildOptions) => {
      const { runBuild } = await import('../src/build/command.ts');
      await runBuild(inputs, options);
      report(0);
    });
}
