import { type Command, Option } from 'commander';
import { readsConfig } from '../src/options/config.ts';
import { hostPort, nonNegativeInt, positiveInt, repeatable } from '../src/options/parsers.ts';
import type { TrainFlags } from '../src/train/config.ts';
import { TRAIN_FLAG_KEYS, TRAIN_OPTIONS, trainFlagOptions, trainOption } from '../src/train/options.ts';
import { addFlags, jsonFlag, PYTHON_FLAG, QUIET_FLAG, type Report, reportFlags, toOption } from './flags.ts';

/** train.json's keys that have no flag, as a config file may spell them (kebab case) */
const TRAIN_FILE_KEYS = Object.keys(TRAIN_OPTIONS)
  .filter((k) => !(TRAIN_FLAG_KEYS as readonly string[]).includes(k))
  .map((k) => k.replaceAll('_', '-'));

/** the training options shown first, beside the flags of where the run happens */
const PLACEMENT = ['device', 'gpus', 'nproc'] as const;

export function defineTrain(program: Command, report: Report): void {
  const cmd = program
    .command('train')
    .description('GRPO on trajectories from `polar build` (PyTorch worker; see docs/train.md)')
    .argument('<trajectories>', 'trajectory JSONL written by polar build (- for stdin)')
    .requiredOption('--out <dir>', 'output directory: step-N checkpoints, metrics.jsonl, config.json');
  // the training options (train.json keys): flags, parsers, help and defaults from one table,
  // TRAIN_OPTIONS (src/train/options.ts); the other flags are about the run itself, typed in TrainFlags
  for (const option of trainOption('model')) cmd.addOption(option);
  cmd
    .option('--resume [dir]', 'continue the run in --out from its latest checkpoint (as eval and loop do)')
    .option(
      '--resume-from <dir>',
      'start from a checkpoint: model, optimiser, scheduler and data position (step-N, or a run --out)',
    )
    .option(
      '--config <file>',
      'the options in a YAML or JSON file: train.json keys (lr, lora_r, ...) and the long flag names; flags on the command line win',
    );
  for (const key of PLACEMENT) for (const option of trainOption(key)) cmd.addOption(option);
  cmd
    .addOption(
      new Option('--nnodes <n>', 'nodes of a run across machines (torchrun on each)').argParser(positiveInt),
    )
    .addOption(
      new Option('--node-rank <r>', "this machine's rank among --nnodes (0 hosts the rendezvous)").argParser(
        nonNegativeInt,
      ),
    )
    .addOption(
      new Option(
        '--rdzv-endpoint <host:port>',
        "node 0's address and a free port, the same on every node",
      ).argParser(hostPort),
    )
    .option('--local-addr <addr>', "this node's address the other nodes reach (torchrun --local-addr)")
    .option(
      '--socket-ifname <if>',
      'the network interface gloo/NCCL use (GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME)',
    )
    .option('--rdzv-id <id>', 'the run id, the same on every node (default: from --rdzv-endpoint)')
    .option(
      '--allow-zero-advantage',
      'train even when every advantage is 0 (polar loop --train-nodes: a step whose groups all scored alike)',
    )
    .addOption(
      new Option(
        '--sampled-by <name>',
        'a model name that serves the trained weights (no sampling warning for it; repeatable)',
      ).argParser(repeatable),
    )
    .addOption(toOption(PYTHON_FLAG));
  for (const option of trainFlagOptions(['model', ...PLACEMENT])) cmd.addOption(option);
  addFlags(
    cmd,
    reportFlags("every step's metrics (loss, KL, clip fraction, entropy, grad norm, lr, tokens/s)"),
  );
  cmd
    .addOption(toOption(jsonFlag("the worker's events", 'one line each; progress then goes nowhere')))
    .addOption(toOption(QUIET_FLAG))
    .addHelpText(
      'after',
      `
Examples:
  polar train traj.jsonl --model Qwen/Qwen3-0.6B --out runs/train
  polar train traj.jsonl --model Qwen/Qwen3-0.6B --out runs/train --resume   # continue after a stop
  polar build runs/eval/captures | polar train - --model tiny:vocab=32 --device cpu --out runs/tiny
  polar train traj.jsonl --model Qwen/Qwen3-0.6B --out /shared/train --gpus 8 \\
    --nnodes 2 --node-rank 0 --rdzv-endpoint 10.0.0.1:29400 --local-addr 10.0.0.1   # and rank 1 on the other node`,
    );
  // train.json's keys without a flag come from the file as they always have (src/train/config.ts)
  readsConfig(cmd, { ownKeys: TRAIN_FILE_KEYS }).action(async (trajectories: string, flags: TrainFlags) => {
    const { trainCommand } = await import('../src/train/command.ts');
    report(await trainCommand(trajectories, flags));
  });
}
