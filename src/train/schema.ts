/**
 * The one source of truth that the Python worker reads: the training options' defaults, enums and JSON
 * Schema (from options.ts), the checkpoint file names, and the JSON Schema of the worker's events.
 * `node --import tsx scripts/gen-train-schema.ts` writes it to src/train/worker/polar_train/schema.json
 * (checked in; test/unit/train/schema.test.ts fails when it is out of date), and
 * polar_train/schema.py loads it. The launcher checks each event the worker prints against
 * workerEventSchema.
 */
import { z } from 'zod';
import { DEFAULTS, OVERLONG_MODES } from '../options/defaults.ts';
import {
  learningRateSchedules,
  lossAggregations,
  TRAIN_DEFAULTS,
  trainAdvantages,
  trainDevices,
  trainOptionsSchema,
} from './options.ts';

/** File names of a run directory and its step-N checkpoints (both languages use these). */
export const CHECKPOINT_FILES = {
  /** optimiser, scheduler, RNG and data position (torch.save) */
  state: 'trainer_state.pt',
  /** polar's checkpoint metadata: step, base model, LoRA, data hash */
  meta: 'polar_checkpoint.json',
  /** the run directory's pointer to its newest step-N */
  latest: 'latest',
  /** the resolved worker config, copied into each checkpoint */
  configCopy: 'polar_train_config.json',
  /** one JSON line per step, in the run directory */
  metrics: 'metrics.jsonl',
  /** with --lora: the peft adapter, beside the merged model */
  adapter: 'adapter',
} as const;

/**
 * The keys of a `tiny:` model spec and their defaults (the worker's tiny.py builds the model; the launcher
 * reads the vocabulary to check trajectories before any Python starts). `stop_bias` adds that much to the
 * logit of `stop_id` (Qwen3's `<|im_end|>`) at every position, in training and in the export alike, so a
 * random model's turns end after a few tokens (docs/export.md, "The tiny Llama").
 */
export const TINY_DEFAULTS = {
  arch: 'llama',
  vocab: 64,
  dim: 32,
  layers: 1,
  heads: 2,
  kv_heads: 1,
  head_dim: 0,
  ffn: 0,
  max_pos: 32768,
  rope_theta: 10000,
  seed: 0,
  stop_bias: 0,
  stop_id: 151645,
} as const;

const num = z.number().nullable();

/** The per-step metrics of a step event (and of metrics.jsonl); see docs/train.md. */
export const STEP_METRICS = [
  'loss',
  'pg_loss',
  'kl',
  'clip_frac',
  'clip_frac_low',
  'clip_frac_high',
  'ratio_mean',
  'entropy',
  'tis_mean',
  'tis_min',
  'tis_max',
  'tis_truncated_frac',
  'staleness_max',
  'staleness_mean',
  'reward_mean',
  'reward_std',
  'advantage_abs_mean',
  'response_tokens_mean',
  'grad_norm',
  'grad_norm_max',
  'tokens_per_s',
  'step_time_s',
  'gpu_mem_gb',
] as const;

/**
 * The worker's `step` event, and each line of metrics.jsonl (CHECKPOINT_FILES.metrics, the same object):
 * metrics may be null (a non-finite value is written as null) and grow over time, so extra keys are
 * allowed. `polar inspect` reads metrics.jsonl with this.
 */
export const stepEventSchema = z.looseObject({
  event: z.literal('step'),
  step: z.number().int().positive(),
  total_steps: z.number().int().positive(),
  updates: z.number().int().nonnegative().optional(),
  lr: num.optional(),
  rollouts: z.number().int().nonnegative().optional(),
  tokens: z.number().int().nonnegative().optional(),
  trained_tokens: z.number().int().nonnegative().optional(),
  ...(Object.fromEntries(STEP_METRICS.map((k) => [k, num.optional()])) as Record<
    (typeof STEP_METRICS)[number],
    z.ZodOptional<typeof num>
  >),
});
export type StepEvent = z.infer<typeof stepEventSchema>;

/** One JSON object per line on the worker's stdout (python -m polar_train). */
export const workerEventSchema = z.discriminatedUnion('event', [
  z.looseObject({ event: z.literal('log'), message: z.string() }),
  // rank 0's first event, once torch is imported: what the launcher's probe cannot know without importing
  // it (src/train/env.ts checkDevice); the installed versions come again for the record
  z.looseObject({
    event: z.literal('environment'),
    python: z.string(),
    torch: z.string(),
    cuda: z.boolean(),
    cuda_devices: z.number().int().nonnegative(),
    device_names: z.array(z.string()),
  }),
  stepEventSchema,
  // progress within a step (src/train/progress.ts): rank 0, after each micro-batch of the reference pass
  // (pi_old / pi_ref forwards) and of the update (forward and backward; total over every PPO epoch)
  z.strictObject({
    event: z.literal('micro'),
    step: z.number().int().positive(),
    total_steps: z.number().int().positive(),
    phase: z.enum(['reference', 'update']),
    done: z.number().int().positive(),
    total: z.number().int().positive(),
  }),
  z.strictObject({
    event: z.literal('checkpoint'),
    step: z.number().int().nonnegative(),
    path: z.string(),
    format: z.literal('safetensors'),
  }),
  z.strictObject({
    event: z.literal('done'),
    steps: z.number().int().nonnegative(),
    checkpoint: z.string().nullable().optional(),
    loss: num.optional(),
  }),
  z.strictObject({
    event: z.literal('error'),
    kind: z.string(),
    message: z.string(),
    traceback: z.string().optional(),
  }),
]);
export type WorkerEvent = z.infer<typeof workerEventSchema>;

/** What schema.json holds. */
export function workerSchema(): Record<string, unknown> {
  return {
    $comment:
      'Generated from src/train/options.ts and src/train/schema.ts by scripts/gen-train-schema.ts; do not edit.',
    defaults: TRAIN_DEFAULTS,
    enums: {
      loss_agg: lossAggregations,
      advantage: trainAdvantages,
      schedule: learningRateSchedules,
      device: trainDevices,
    },
    // polar_train/overlong.py: the modes, and the mode and buffer of a trajectory that recorded none
    overlong: {
      modes: OVERLONG_MODES,
      default: DEFAULTS.overlong.value,
      buffer: DEFAULTS.overlongBuffer.value,
    },
    files: CHECKPOINT_FILES,
    tiny: TINY_DEFAULTS,
    options: z.toJSONSchema(trainOptionsSchema),
    events: z.toJSONSchema(workerEventSchema),
  };
}

/** schema.json's text (what the generator writes and the test compares). */
export function workerSchemaText(): string {
  return `${JSON.stringify(workerSchema(), null, 2)}\n`;
}
