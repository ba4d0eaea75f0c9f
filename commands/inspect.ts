import { type Command, Option } from 'commander';
import type { InspectFlags } from '../src/inspect/command.ts';
import { DEFAULTS, withDefault } from '../src/options/defaults.ts';
import { positiveInt, positiveIntOrAll } from '../src/options/parsers.ts';
import type { Report } from './flags.ts';

export function defineInspect(program: Command, report: Report): void {
  program
    .command('inspect')
    .description('a self-contained HTML report of trajectories or a loop run (docs/inspect.md)')
    .argument('<input>', 'a trajectory file (polar build output, - for stdin) or a polar loop run directory')
    .addOption(
      withDefault(
        new Option('-o, --output <file>', 'where to write the page (- for stdout)'),
        DEFAULTS.inspectOutput,
      ),
    )
    .option(
      '--tokenizer <dir>',
      "tokenizer directory (tokenizer.json); default: the trajectories' model's own when its files are at hand, else the bundled Qwen3 tokenizer",
    )
    .addOption(
      withDefault(
        new Option('--max-tokens-per-trace <n>', 'tokens rendered per trace before "show more"').argParser(
          positiveInt,
        ),
        DEFAULTS.maxTokensPerTrace,
      ),
    )
    .addOption(
      new Option(
        '--max-trajectories <n>',
        'trajectories shown per file or step ("all"; default: all for a file, 16 per step for a run)',
      ).argParser(positiveIntOrAll),
    )
    .addHelpText(
      'after',
      `
Examples:
  polar inspect traj.jsonl -o report.html
  polar inspect runs/loop-1 -o loop.html --max-trajectories 4
  polar build captures/ | polar inspect - -o - > report.html`,
    )
    .action(async (input: string, options: InspectFlags) => {
      const { runInspect } = await import('../src/inspect/command.ts');
      report(await runInspect(input, options));
    });
}
