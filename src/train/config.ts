/**
 * `polar train` options: a strict schema for the user's train.json, the defaults, and the merge
 * (defaults < --config file < flags) into the resolved config that the Python worker reads and that is
 * written to <out>/config.json. Keys are snake_case, the same as the worker's (polar_train/trainer.py).
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { InputError, UsageError } from '../errors.ts';
import { firstIssue } from '../util/zod.ts';
import { CHECKPOINT_FILES } from './schema.ts';

export const lossAggregations = [
  'token-mean',
  'seq-mean-token-mean',
  'seq-mean-token-sum',
  'dr-grpo',
] as const;
export const trainAdvantages = ['rloo', 'grpo', 'dr-grpo'] as const;
export const learningRateSchedules = ['constant', 'cosine'] as const;
export const trainDevices = ['cuda', 'cpu'] as const;

const positiveInt = z.number().int().positive();
const nonNegative = z.number().nonnegative();

/** What a user may set in train.json (and through flags). Unknown keys are an error. */
export const trainOptionsSchema = z.strictObject({
  model: z.string().min(1),
  device: z.enum(trainDevices),
  gpus: positiveInt,
  nproc: positiveInt,
  lora: z.boolean(),
  lora_r: positiveInt,
  lora_alpha: z.number().positive(),
  lora_dropout: z.number().min(0).max(1),
  lora_target_modules: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
  lr: z.number().positive(),
  min_lr_ratio: z.number().min(0).max(1),
  warmup_steps: z.number().int().nonnegative(),
  schedule: z.enum(learningRateSchedules),
  weight_decay: nonNegative,
  adam_betas: z.tuple([z.number().min(0).max(1), z.number().min(0).max(1)]),
  adam_eps: z.number().positive(),
  grad_clip: nonNegative,
  epochs: positiveInt,
  max_steps: positiveInt.nullable(),
  batch_rollouts: positiveInt,
  mini_batches: positiveInt,
  ppo_epochs: positiveInt,
  shuffle: z.boolean(),
  clip_low: z.number().min(0).max(1),
  clip_high: nonNegative,
  loss_agg: z.enum(lossAggregations),
  loss_norm_tokens: positiveInt.nullable(),
  advantage: z.enum(trainAdvantages),
  tis: z.boolean(),
  tis_cap: z.number().positive(),
  kl_coef: nonNegative,
  micro_batch_tokens: positiveInt,
  logprob_chunk: positiveInt,
  bf16: z.boolean().nullable(),
  gradient_checkpointing: z.boolean(),
  save_every: z.number().int().nonnegative(),
  seed: z.number().int().nonnegative(),
});

export type TrainOptions = z.infer<typeof trainOptionsSchema>;
export const userConfigSchema = trainOptionsSchema.partial();
export type UserTrainConfig = z.infer<typeof userConfigSchema>;

/** Defaults follow shared/reference/grpo.md (Polar's recipe: lr 1e-6 constant, betas 0.9/0.98, wd 0.1, clip 0.2/0.28, TIS). */
export const TRAIN_DEFAULTS: Omit<TrainOptions, 'model'> = {
  device: 'cuda',
  gpus: 1,
  nproc: 1,
  lora: false,
  lora_r: 16,
  lora_alpha: 32,
  lora_dropout: 0,
  lora_target_modules: 'all-linear',
  lr: 1e-6,
  min_lr_ratio: 0,
  warmup_steps: 0,
  schedule: 'constant',
  weight_decay: 0.1,
  adam_betas: [0.9, 0.98],
  adam_eps: 1e-8,
  grad_clip: 1.0,
  epochs: 1,
  max_steps: null,
  batch_rollouts: 144,
  mini_batches: 1,
  ppo_epochs: 1,
  shuffle: true,
  clip_low: 0.2,
  clip_high: 0.28,
  loss_agg: 'token-mean',
  loss_norm_tokens: null,
  advantage: 'rloo',
  tis: true,
  tis_cap: 2.0,
  kl_coef: 0,
  micro_batch_tokens: 16384,
  logprob_chunk: 1024,
  bf16: null,
  gradient_checkpointing: true,
  save_every: 10,
  seed: 0,
};

/** The file the worker reads: every option resolved, plus the run's inputs. */
export interface ResolvedTrainConfig extends TrainOptions {
  polar_train_config: 1;
  trajectories: string;
  out: string;
  resume: string | null;
  bf16: boolean;
}

export async function readUserConfig(file: string): Promise<UserTrainConfig> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new InputError(file, undefined, undefined, code === 'ENOENT' ? 'no such file' : String(error));
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new InputError(file, undefined, undefined, `not valid JSON (${(error as Error).message})`);
  }
  const parsed = userConfigSchema.safeParse(value);
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error);
    const known = Object.keys(trainOptionsSchema.shape).join(', ');
    throw new InputError(file, undefined, field, message, `known keys: ${known} (see docs/train.md)`);
  }
  return parsed.data;
}

export interface ResolveInputs {
  trajectories: string;
  out: string;
  resume?: string | undefined;
  /** from --config */
  file?: UserTrainConfig;
  /** from flags (undefined = not given) */
  flags: Partial<Record<keyof TrainOptions, unknown>>;
}

/** defaults < config file < flags; validates the merged result (flags get the same checks as the file). */
export function resolveTrainConfig(inputs: ResolveInputs): ResolvedTrainConfig {
  const flags = Object.fromEntries(Object.entries(inputs.flags).filter(([, v]) => v !== undefined));
  const merged: Record<string, unknown> = { ...TRAIN_DEFAULTS, ...inputs.file, ...flags };
  if (merged.model === undefined) {
    if (!inputs.resume)
      throw new UsageError('--model is required', 'e.g. --model Qwen/Qwen3.5-4B or --model ./my-model');
    merged.model = inputs.resume; // the worker restores the model from the checkpoint
  }
  const parsed = trainOptionsSchema.safeParse(merged);
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error);
    const flag = `--${field.replaceAll('_', '-')}`;
    throw new UsageError(`${flag}: ${message} (got ${JSON.stringify(merged[field.split('.')[0] ?? ''])})`);
  }
  const o = parsed.data;
  if (o.gpus > 1 && o.device === 'cpu') {
    throw new UsageError(
      '--gpus > 1 needs --device cuda',
      'on the CPU, --nproc N runs N data-parallel processes',
    );
  }
  if (o.nproc > 1 && o.device === 'cuda') {
    throw new UsageError('--nproc is for --device cpu', 'on GPUs, --gpus N runs one process per GPU');
  }
  if ((o.gpus > 1 || o.nproc > 1) && o.lora) {
    throw new UsageError(
      '--lora with --gpus > 1 or --nproc > 1 is not supported yet',
      'LoRA of a 4B-class model fits one GPU: use --gpus 1',
    );
  }
  if (o.clip_low >= 1) throw new UsageError(`--clip-low: must be below 1 (got ${o.clip_low})`);
  return {
    polar_train_config: 1,
    ...o,
    bf16: o.bf16 ?? o.device === 'cuda',
    trajectories: inputs.trajectories,
    out: inputs.out,
    resume: inputs.resume ?? null,
  };
}

/** `polar train` flags after parsing (commands/train.ts); undefined = not given (train.json or the default applies). */
export interface TrainFlags {
  model?: string;
  out: string;
  /** --resume: continue the run in --out (true); a directory is the deprecated form of --resume-from */
  resume?: boolean | string;
  /** --resume-from DIR: start from a checkpoint (a step-N directory or another run's --out) */
  resumeFrom?: string;
  config?: string;
  lora?: boolean;
  device?: 'cuda' | 'cpu';
  gpus?: number;
  nproc?: number;
  python?: string;
  json?: boolean;
  /** a run across nodes (torchrun): nodes, this node's rank, node 0's rendezvous HOST:PORT */
  nnodes?: number;
  nodeRank?: number;
  rdzvEndpoint?: string;
  localAddr?: string;
  socketIfname?: string;
  rdzvId?: string;
  lr?: number;
  epochs?: number;
  maxSteps?: number;
  batchRollouts?: number;
  miniBatches?: number;
  ppoEpochs?: number;
  clipLow?: number;
  clipHigh?: number;
  lossAgg?: (typeof lossAggregations)[number];
  advantage?: (typeof trainAdvantages)[number];
  tis?: boolean;
  tisCap?: number;
  klCoef?: number;
  microBatchTokens?: number;
  logprobChunk?: number;
  warmupSteps?: number;
  schedule?: (typeof learningRateSchedules)[number];
  gradientCheckpointing?: boolean;
  bf16?: boolean;
  saveEvery?: number;
  seed?: number;
}

/**
 * The checkpoint directory a run resumes from: --resume continues the run in --out (like eval and
 * loop), --resume-from DIR starts from another checkpoint. `--resume DIR` (train's old form) still works
 * for a release, with a warning.
 */
export function resumeDirectory(
  f: Pick<TrainFlags, 'resume' | 'resumeFrom' | 'out'>,
  warn: (message: string) => void = () => {},
): string | undefined {
  if (f.resume !== undefined && f.resumeFrom !== undefined)
    throw new UsageError('--resume and --resume-from both name where to resume from: give one');
  if (f.resumeFrom !== undefined) return f.resumeFrom;
  if (typeof f.resume === 'string') {
    warn(`--resume ${f.resume} is now --resume-from ${f.resume} (--resume alone continues the run in --out)`);
    return f.resume;
  }
  if (f.resume !== true) return undefined;
  if (!existsSync(join(f.out, CHECKPOINT_FILES.latest)))
    throw new UsageError(
      `--resume: --out ${f.out} holds no checkpoint to continue from (no latest file)`,
      'drop --resume to start a new run, or give --resume-from DIR',
    );
  return f.out;
}

/** commander's camelCase flags -> the config's snake_case keys (undefined = not given). */
export function flagsToOptions(f: TrainFlags): Partial<Record<keyof TrainOptions, unknown>> {
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
