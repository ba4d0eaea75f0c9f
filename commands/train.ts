import type { Command } from 'commander';
import type { TrainFlags } from '../src/train/config.ts';
import { trainFlagOptions, trainOption } from '../src/train/options.ts';
import type { Report } from './shared.ts';

export function defineTrain(program: Command, report: Report): void {
  const cmd = program
    .command('train')
    .description('GRPO on trajectories from `polar build` (PyTorch worker; see docs/train.md)')
    .argument('<trajectories>', 'trajectory JSONL written by polar build (- for stdin)')
    .requiredOption('--out <dir>', 'output directory: step-N checkpoints, metrics.jsonl, config.json');
  // the training options, their flags, parsers, help and defaults: one table (src/train/options.ts)
  for (const option of trainOption('model')) cmd.addOption(option);
  cmd
    .option('--resume [dir]', 'continue the run in --out from its latest checkpoint (as eval and loop do)')
    .option(
      '--resume-from <dir>',
      'start from a checkpoint: model, optimiser, scheduler and data position (step-N, or a run --out)',
    )
    .option('--config <file>', 'train.json with config keys (flags override it)')
    .option(
      '--python <path>',
      'Python with torch (default: $POLAR_PYTHON, .venv of npm run setup:python, python3, /usr/bin/python3)',
    );
  for (const option of trainFlagOptions(['model'])) cmd.addOption(option);
  cmd
    .option('--json', 'write the worker events as JSON lines to stdout')
    .addHelpText(
      'after',
      `
Examples:
  polar train traj.jsonl --model Qwen/Qwen3-0.6B --out runs/train
  polar train traj.jsonl --model Qwen/Qwen3-0.6B --out runs/train --resume   # continue after a stop
  polar build runs/eval/captures | polar train - --model tiny:vocab=32 --device cpu --out runs/tiny`,
    )
    .action(async (trajectories: string, flags: TrainFlags) => {
      const { trainCommand } = await import('../src/train/command.ts');
      report(await trainCommand(trajectories, flags));
    });
}
