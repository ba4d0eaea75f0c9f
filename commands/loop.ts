import type { Command } from 'commander';
import { addBackendFlags, addRolloutFlags } from './shared.ts';

export function defineLoop(program: Command): void {
  const cmd = program
    .command('loop')
    .description('the whole RL loop: rollouts -> build -> train -> publish new weights -> rollouts')
    .requiredOption('--train-set <path>', 'tasks to train on (SWE-bench schema: .jsonl, .json, .parquet)')
    .option('--eval-set <path>', 'held-out tasks, evaluated every --eval-every steps')
    .requiredOption('--harness <name>', 'codex | claude | pi | generic')
    .option('--train-model <path|id>', 'checkpoint training starts from (default: --model)')
    .option('--group-size <n>', 'samples per task (the GRPO group)', '16')
    .option('--tasks-per-step <n>', 'tasks per step', '9')
    .option('--steps <n>', 'steps to run', '50')
    .option('--eval-every <n>', 'held-out eval every n steps (0: never)', '10')
    .requiredOption('--out <dir>', 'run directory (run/step-N/...)')
    .option('--concurrency <n>', 'samples run at once', '4')
    .option(
      '--reload-cmd <cmd>',
      'command that makes the server load {checkpoint} (vLLM: restart it); polar then waits until it answers',
    )
    .option('--train-config <file>', 'train.json for polar train')
    .option('--device <d>', 'training device: cuda | cpu', 'cuda')
    .option('--lora', 'train LoRA adapters instead of all weights', false)
    .option('--lr <lr>', 'learning rate')
    .option('--grade-empty-patches', 'run the tests for empty patches too (see polar eval)', false)
    .option('--resume', 'continue the run in --out after its last finished step', false)
    .option('-q, --quiet', 'less output', false);
  addBackendFlags(addRolloutFlags(cmd)).action(async (flags: Record<string, unknown>) => {
    const { loopCommand } = await import('../src/loop/command.ts');
    process.exitCode = await loopCommand(flags);
  });
}
