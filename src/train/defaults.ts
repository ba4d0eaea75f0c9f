/**
 * `polar train`'s choices and defaults as plain values: what `--help` shows (commands/train.ts) without
 * loading the schema (config.ts, zod), and what config.ts merges a train.json and the flags over.
 */
import type { TrainOptions } from './config.ts';

export const lossAggregations = [
  'token-mean',
  'seq-mean-token-mean',
  'seq-mean-token-sum',
  'dr-grpo',
] as const;
export const trainAdvantages = ['rloo', 'grpo', 'dr-grpo'] as const;
export const learningRateSchedules = ['constant', 'cosine'] as const;
export const trainDevices = ['cuda', 'cpu'] as const;

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
  sampling_gap_limit: 2.0,
  kl_coef: 0,
  micro_batch_tokens: 16384,
  logprob_chunk: 1024,
  bf16: null,
  gradient_checkpointing: true,
  save_every: 10,
  seed: 0,
};
