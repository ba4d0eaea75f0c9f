import { type Command, Option } from 'commander';
import { floatIn, hostPort, nonNegativeInt, oneOf, positiveInt } from '../src/options/parsers.ts';
import {
  learningRateSchedules,
  lossAggregations,
  TRAIN_DEFAULTS,
  type TrainFlags,
  trainAdvantages,
  trainDevices,
} from '../src/train/config.ts';
import type { Report } from './shared.ts';

/** an option whose default lives in TRAIN_DEFAULTS (so train.json can override it): shown, not set */
const opt = <T>(
  flags: string,
  description: string,
  parser?: (v: string) => T,
  fallback?: unknown,
): Option => {
  const shown = fallback === undefined ? '' : ` (default: ${String(fallback)})`;
  const option = new Option(flags, `${description}${shown}`);
  return parser ? option.argParser(parser) : option;
};

const D = TRAIN_DEFAULTS;
const positive = floatIn(0, Number.POSITIVE_INFINITY, { open: 'min' });
const nonNegative = floatIn(0, Number.POSITIVE_INFINITY);

export function defineTrain(program: Command, report: Report): void {
  program
    .command('train')
    .description('GRPO on trajectories from `polar build` (PyTorch worker; see docs/train.md)')
    .argument('<trajectories>', 'trajectory JSONL written by polar build (- for stdin)')
    .requiredOption('--out <dir>', 'output directory: step-N checkpoints, metrics.jsonl, config.json')
    .option(
      '--model <id|dir>',
      'Hugging Face model id or directory (tiny:arch=qwen3,... for a tiny random model of a real class)',
    )
    .option('--resume [dir]', 'continue the run in --out from its latest checkpoint (as eval and loop do)')
    .option(
      '--resume-from <dir>',
      'start from a checkpoint: model, optimiser, scheduler and data position (step-N, or a run --out)',
    )
    .option('--config <file>', 'train.json with config keys (flags override it)')
    .option('--lora', 'train LoRA adapters (peft); the frozen base is the KL reference')
    .addOption(opt('--device <device>', 'cuda or cpu', oneOf(trainDevices), D.device))
    .addOption(opt('--gpus <n>', 'data-parallel GPUs (FSDP through torchrun)', positiveInt, D.gpus))
    .addOption(
      opt(
        '--nproc <n>',
        'data-parallel processes with --device cpu (FSDP over gloo through torchrun)',
        positiveInt,
        D.nproc,
      ),
    )
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
      '--python <path>',
      'Python with torch (default: $POLAR_PYTHON, .venv of npm run setup:python, python3, /usr/bin/python3)',
    )
    .addOption(opt('--lr <lr>', 'learning rate', positive, D.lr))
    .addOption(opt('--epochs <n>', 'passes over the trajectory file', positiveInt, D.epochs))
    .addOption(opt('--max-steps <n>', 'stop after n steps', positiveInt))
    .addOption(opt('--batch-rollouts <n>', 'rollouts per step', positiveInt, D.batch_rollouts))
    .addOption(
      opt('--mini-batches <n>', 'optimiser updates per epoch of a step', positiveInt, D.mini_batches),
    )
    .addOption(opt('--ppo-epochs <n>', 'optimisation epochs over each step', positiveInt, D.ppo_epochs))
    .addOption(opt('--clip-low <eps>', 'lower ratio clip', floatIn(0, 1), D.clip_low))
    .addOption(opt('--clip-high <eps>', 'upper ratio clip', nonNegative, D.clip_high))
    .addOption(opt('--loss-agg <mode>', 'loss aggregation', oneOf(lossAggregations), D.loss_agg))
    .addOption(
      opt('--advantage <kind>', 'advantage when a record has none', oneOf(trainAdvantages), D.advantage),
    )
    .option('--tis', 'truncated importance sampling against the captured logprobs (default)')
    .option('--no-tis', 'no off-policy correction (accepts traces without logprobs)')
    .addOption(opt('--tis-cap <c>', 'TIS weight cap', positive, D.tis_cap))
    .addOption(opt('--kl-coef <beta>', 'k3 KL coefficient to the reference model', nonNegative, D.kl_coef))
    .addOption(
      opt(
        '--micro-batch-tokens <n>',
        'token budget of one packed micro-batch',
        positiveInt,
        D.micro_batch_tokens,
      ),
    )
    .addOption(
      opt('--logprob-chunk <n>', 'tokens per chunk when computing logprobs', positiveInt, D.logprob_chunk),
    )
    .addOption(
      opt('--warmup-steps <n>', 'linear warm-up, in optimiser updates', nonNegativeInt, D.warmup_steps),
    )
    .addOption(opt('--schedule <kind>', 'learning-rate schedule', oneOf(learningRateSchedules), D.schedule))
    .option('--gradient-checkpointing', 'recompute activations in backward (default)')
    .option('--no-gradient-checkpointing', 'keep activations')
    .option('--bf16', 'bf16 autocast (default on cuda)')
    .option('--no-bf16', 'fp32 compute')
    .addOption(
      opt('--save-every <n>', 'checkpoint every n steps (always at the end)', nonNegativeInt, D.save_every),
    )
    .addOption(opt('--seed <n>', 'data order seed', nonNegativeInt, D.seed))
    .option('--json', 'write the worker events as JSON lines to stdout')
    .addHelpText(
      'after',
      `
Examples:
  polar train traj.jsonl --model Qwen/Qwen3-0.6B --out runs/train
  polar train traj.jsonl --model Qwen/Qwen3-0.6B --out runs/train --resume   # continue after a stop
  polar build runs/eval/captures | polar train - --model tiny:vocab=32 --device cpu --out runs/tiny
  polar train traj.jsonl --model Qwen/Qwen3-0.6B --out /shared/train --gpus 8 \\
    --nnodes 2 --node-rank 0 --rdzv-endpoint 10.0.0.1:29400 --local-addr 10.0.0.1   # and rank 1 on the other node`,
    )
    .action(async (trajectories: string, flags: TrainFlags) => {
      const { trainCommand } = await import('../src/train/command.ts');
      report(await trainCommand(trajectories, flags));
    });
}
