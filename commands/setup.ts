import type { Command } from 'commander';
import { QUIET_FLAG, type Report, toOption } from './flags.ts';

export function defineSetup(program: Command, report: Report): void {
  program
    .command('setup')
    .description(
      "make the trainer's Python environment (torch, transformers, peft) where polar train and export find it",
    )
    .option('--python <path>', 'the Python 3.10+ to make it with (default: python3)')
    .option(
      '--venv <dir>',
      "where to make it (default: polar's cache, $POLAR_CACHE_DIR/python or ~/.cache/polar/python)",
    )
    .option('--cluster', 'also the optional cluster group (Ray, for --cluster ray; docs/cluster.md)')
    .option('--report', 'also the optional tracking group (tensorboard, for --report-to tensorboard)')
    .option('--wandb', 'also Weights & Biases (for --report-to wandb)')
    .option(
      '--rebuild',
      'remove the environment that is there and make it again (with --python); without it, an environment made by another Python than --python is refused',
    )
    .addOption(toOption(QUIET_FLAG))
    .addHelpText(
      'after',
      `
Examples:
  polar setup                     # then polar train and polar export use it
  polar setup --python python3.12
  polar setup --python python3.12 --rebuild   # the environment is there, made by another Python`,
    )
    .action(async (flags) => {
      const { setupCommand } = await import('../src/setup/command.ts');
      report(await setupCommand(flags));
    });
}
