import { type Command, Option } from 'commander';
import type { BuildFlags } from '../src/build/command.ts';
import { DEFAULTS, UNPARSED_TOOL_CALL_MODES, withDefault } from '../src/options/defaults.ts';
import { groupBy, listOf, nonNegativeInt, oneOf, positiveInt } from '../src/options/parsers.ts';
import { trainAdvantages } from '../src/train/options.ts';
import { outputFormats } from '../src/trajectory/formats.ts';
import { traceKinds } from '../src/trajectory/record.ts';
import { jsonFlag, OVERLONG_BUFFER_FLAG, overlongFlag, QUIET_FLAG, type Report, toOption } from './flags.ts';

export function defineBuild(program: Command, report: Report): void {
  program
    .command('build')
    .description('rebuild captures into token-exact GRPO trajectories (docs/trajectory-format.md)')
    .argument('<inputs...>', 'capture files, directories (scanned for *.jsonl) or - for stdin')
    .option('-o, --output <file>', 'write trajectories to FILE (default: stdout)')
    .addOption(
      withDefault(
        new Option('--format <format>', 'polar (trajectory records) or verl (one row per trace)').argParser(
          oneOf(outputFormats),
        ),
        DEFAULTS.buildFormat,
      ),
    )
    .option('--rewards <file>', 'JSONL of {session, reward} or {task_id, sample, reward}')
    .addOption(
      withDefault(
        new Option(
          '--group-by <key>',
          'GRPO groups: task_id, none, or meta:KEY of the session record',
        ).argParser(groupBy),
        DEFAULTS.groupBy,
      ),
    )
    .addOption(
      new Option('--advantage <kind>', 'deprecated: polar train --advantage')
        .argParser(oneOf([...trainAdvantages, 'none']))
        .hideHelp(),
    )
    .option('--drop-uniform-groups', 'drop groups whose rewards are all equal')
    .addOption(
      new Option('--max-trace-tokens <n>', 'longest trace kept (prompt + response tokens)').argParser(
        positiveInt,
      ),
    )
    .addOption(
      new Option('--max-tokens <n>', 'deprecated: --max-trace-tokens').argParser(positiveInt).hideHelp(),
    )
    .addOption(
      withDefault(
        new Option(
          '--over-max-trace-tokens <mode>',
          'over --max-trace-tokens: truncate the trace, or drop the trajectory',
        ).argParser(oneOf(['truncate', 'drop'] as const)),
        DEFAULTS.overMaxTraceTokens,
      ),
    )
    .addOption(toOption(overlongFlag(['truncate', 'drop'])))
    .addOption(toOption(OVERLONG_BUFFER_FLAG))
    .addOption(
      new Option('--exclude-kind <kinds>', `drop traces of these kinds (${traceKinds.join(',')})`).argParser(
        listOf(oneOf(traceKinds)),
      ),
    )
    .option('--require-token-exact', 'drop sessions with any call lacking server token ids or logprobs')
    .option('--skip-invalid', 'skip (and count) malformed or schema-invalid lines instead of failing')
    .addOption(
      withDefault(
        new Option('--eot-id <ids>', 'end-of-turn token ids, comma-separated').argParser(
          listOf(nonNegativeInt),
        ),
        DEFAULTS.eotIds,
      ),
    )
    .option('--splice', 'also merge turns whose assistant part the chat template re-rendered')
    .addOption(
      withDefault(
        new Option(
          '--unparsed-tool-calls <mode>',
          'a trajectory holding a tool call the server did not parse: zero (reward 0, tokens trained), mask (its tokens not trained) or keep',
        ).argParser(oneOf(UNPARSED_TOOL_CALL_MODES)),
        DEFAULTS.unparsedToolCalls,
      ),
    )
    .option('--stats', 'print the report on stdout and write no trajectories')
    .addOption(toOption(jsonFlag('the report', 'with -o or --stats')))
    .addOption(toOption(QUIET_FLAG))
    .addHelpText(
      'after',
      `
Streams: trajectories go to stdout (or -o FILE); the report goes to stderr, or to stdout with --stats
or --json. A closed stdout (polar build ... | head) ends the build quietly with exit 0.
Advantages are computed by polar train (--advantage), from the rewards and groups written here.

Examples:
  polar build runs/eval/captures -o traj.jsonl
  polar build runs/eval/captures --stats --json | jq .tokens_trainable
  polar build capture.jsonl --rewards rewards.jsonl --max-trace-tokens 32768 -o traj.jsonl`,
    )
    .action(async (inputs: string[], flags: BuildFlags) => {
      const { buildCommand } = await import('../src/build/command.ts');
      report(await buildCommand(inputs, flags));
    });
}
