import { type Command, InvalidArgumentError, Option } from 'commander';
import {
  learningRateSchedules,
  lossAggregations,
  trainAdvantages,
  trainDevices,
} from '../src/train/config.ts';

const num = (value: string): number => {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`not a number: ${value}`);
  return n;
};

export interface TrainFlags {
  model?: string;
  out: string;
  resume?: string;
  config?: string;
  lora?: boolean;
  device?: 'cuda' | 'cpu';
  gpus?: number;
  nproc?: number;
  python?: string;
  json?: boolean;
  lr?: number;
  epochs?: number;
  maxSteps?: number;
  batchRollouts?: number;
  miniBatches?: number;
  ppoEpochs?: number;
  clipLow?: number;
  clipHigh?: number;
  lossAgg?: string;
  advantage?: string;
  tis?: boolean;
  tisCap?: number;
  klCoef?: number;
  microBatchTokens?: number;
  logprobChunk?: number;
  warmupSteps?: number;
  schedule?: string;
  gradientCheckpointing?: boolean;
  bf16?: boolean;
  saveEvery?: number;
  seed?: number;
}

/** commander's camelCase flags -> the config's snake_case keys (undefined = not given). */
export function flagsToOptions(f: TrainFlags): Record<string, unknown> {
  return {
    model: f.model,
    lora: f.lora,
    device: f.device,
    gpus: f.gpus,
    nproc: f.nproc,
    lr: f.lr,
    epochs: f.epochs,
    max_steps: f.maxSteps,
    batch_rollouts: f.batchRollouts,
    mini_batches: f.miniBatches,
    ppo_epochs: f.ppoEpochs,
    clip_low: f.clipLow,
    clip_high: f.clipHigh,
    loss_agg: f.lossAgg,
    advantage: f.advantage,
    tis: f.tis,
    tis_cap: f.tisCap,
    kl_coef: f.klCoef,
    micro_batch_tokens: f.microBatchTokens,
    logprob_chunk: f.logprobChunk,
    warmup_steps: f.warmupSteps,
    schedule: f.schedule,
    gradient_checkpointing: f.gradientCheckpointing,
    bf16: f.bf16,
    save_every: f.saveEvery,
    seed: f.seed,
  };
}

export function defineTrain(program: Command): void {
  program
    .command('train')
    .description('GRPO on trajectories from `polar build` (PyTorch worker; see docs/train.md)')
    .argument('<trajectories>', 'trajectory JSONL written by polar build (- for stdin)')
    .requiredOption('--out <dir>', 'output directory: step-N checkpoints, metrics.jsonl, config.json')
    .option(
      '--model <id|dir>',
      'Hugging Face model id or directory (tiny:arch=qwen3,... for a tiny random model of a real class)',
    )
    .option(
      '--resume <dir>',
      'resume model, optimiser, scheduler and data position from a checkpoint directory',
    )
    .option('--config <file>', 'train.json with config keys (flags override it)')
    .option('--lora', 'train LoRA adapters (peft); the frozen base is the KL reference')
    .addOption(new Option('--device <device>', 'cuda (default) or cpu').choices(trainDevices))
    .option('--gpus <n>', 'data-parallel GPUs (FSDP through torchrun)', num)
    .option('--nproc <n>', 'data-parallel processes with --device cpu (FSDP over gloo through torchrun)', num)
    .option(
      '--python <path>',
      'Python with torch (default: $POLAR_PYTHON, .venv of npm run setup:python, python3, /usr/bin/python3)',
    )
    .option('--lr <lr>', 'learning rate (default 1e-6)', num)
    .option('--epochs <n>', 'passes over the trajectory file (default 1)', num)
    .option('--max-steps <n>', 'stop after n steps', num)
    .option('--batch-rollouts <n>', 'rollouts per step (default 144)', num)
    .option('--mini-batches <n>', 'optimiser updates per epoch of a step (default 1)', num)
    .option('--ppo-epochs <n>', 'optimisation epochs over each step (default 1)', num)
    .option('--clip-low <eps>', 'lower ratio clip (default 0.2)', num)
    .option('--clip-high <eps>', 'upper ratio clip (default 0.28)', num)
    .addOption(
      new Option('--loss-agg <mode>', 'loss aggregation (default token-mean)').choices(lossAggregations),
    )
    .addOption(
      new Option('--advantage <kind>', 'advantage when a record has none (default rloo)').choices(
        trainAdvantages,
      ),
    )
    .option('--tis', 'truncated importance sampling against the captured logprobs (default)')
    .option('--no-tis', 'no off-policy correction (accepts traces without logprobs)')
    .option('--tis-cap <c>', 'TIS weight cap (default 2)', num)
    .option('--kl-coef <beta>', 'k3 KL coefficient to the reference model (default 0)', num)
    .option('--micro-batch-tokens <n>', 'token budget of one packed micro-batch (default 16384)', num)
    .option('--logprob-chunk <n>', 'tokens per chunk when computing logprobs (default 1024)', num)
    .option('--warmup-steps <n>', 'linear warm-up, in optimiser updates', num)
    .addOption(new Option('--schedule <kind>', 'learning-rate schedule').choices(learningRateSchedules))
    .option('--gradient-checkpointing', 'recompute activations in backward (default)')
    .option('--no-gradient-checkpointing', 'keep activations')
    .option('--bf16', 'bf16 autocast (default on cuda)')
    .option('--no-bf16', 'fp32 compute')
    .option('--save-every <n>', 'checkpoint every n steps (default 10; always at the end)', num)
    .option('--seed <n>', 'data order seed', num)
    .option('--json', 'write the worker events as JSON lines to stdout')
    .action(async (trajectories: string, flags: TrainFlags) => {
      const { runTrain } = await import('../src/train/launch.ts');
      await runTrain({
        trajectories,
        out: flags.out,
        resume: flags.resume,
        configFile: flags.config,
        flags: flagsToOptions(flags),
        python: flags.python,
        json: flags.json ?? false,
      });
    });
}
