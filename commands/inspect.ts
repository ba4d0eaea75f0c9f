import type { Command } from 'commander';
import type { RawInspectOptions } from '../src/inspect/command.ts';

export function defineInspect(program: Command): void {
  program
    .command('inspect')
    .description('a self-contained HTML report of trajectories or a loop run (docs/inspect.md)')
    .argument('<input>', 'a trajectory file (polar build output, - for stdin) or a polar loop run directory')
    .option('-o, --output <file>', 'where to write the page (- for stdout)', 'report.html')
    .option('--tokenizer <dir>', 'tokenizer directory (tokenizer.json); default: the bundled Qwen3 tokenizer')
    .option('--max-tokens-per-trace <n>', 'tokens rendered per trace before "show more"', '2000')
    .option(
      '--max-trajectories <n>',
      'trajectories shown per file or step ("all"; default: all for a file, 16 per step for a run)',
    )
    .action(async (input: string, options: RawInspectOptions) => {
      const { runInspect } = await import('../src/inspect/command.ts');
      await runInspect(input, options);
    });
}
