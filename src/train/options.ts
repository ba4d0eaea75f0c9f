/**
 * `polar train`'s options, declared once: TRAIN_OPTIONS is a table of config keys (snake_case, as
 * train.json and the Python worker name them), each with its type (a zod schema for train.json and the
 * merged config, and the flag parser of src/options/parsers.ts), its default and, when it has a flag,
 * the flag's help. Everything else is derived from it:
 *   trainOptionsSchema / TrainOptions   train.json's strict schema and the resolved options (config.ts)
 *   TRAIN_DEFAULTS                      -> schema.json -> the worker's DEFAULTS (polar_train/schema.py)
 *   trainFlagOptions() / trainOption()  the commander options of `polar train` (and polar loop's)
 *   TrainOptionFlags / flagsToOptions   the flags' type, and the flags as config keys
 * A flag's name is its key in kebab case (`batch_rollouts` is `--batch-rollouts`, read back by
 * commander as `batchRollouts`), so nothing maps one to the other by hand. Train flags have no commander
 * default (unset = not given: train.json or the default applies, config.ts); --help shows the default.
 * How to add an option: docs/cli.md ("Adding a flag").
 */
import { Option } from 'commander';
import { z } from 'zod';
import { DEFAULTS, OVERLONG_MODES } from '../options/defaults.ts';
import { floatIn, nonNegativeInt, oneOf, type Parser, positiveInt } from '../options/parsers.ts';

export const lossAggregations = [
  'token-mean',
  'seq-mean-token-mean',
  'seq-mean-token-sum',
  'dr-grpo',
] as const;
/** the advantage estimators the worker registers (polar_train/advantage.py), the default first */
export const trainAdvantages = ['grpo', 'dr-grpo', 'rloo'] as const;
export const learningRateSchedules = ['constant', 'cosine'] as const;
export const trainDevices = ['cuda', 'cpu'] as const;

/** A value type: its schema (train.json, the merged config) and, for a flag, its parser. */
interface Kind<T> {
  schema: z.ZodType<T>;
  parse?: Parser<T>;
}

const kinds = {
  text: { schema: z.string().min(1) } as Kind<string>,
  switch: { schema: z.boolean() } as Kind<boolean>,
  positiveInt: { schema: z.number().int().positive(), parse: positiveInt } as Kind<number>,
  nonNegativeInt: { schema: z.number().int().nonnegative(), parse: nonNegativeInt } as Kind<number>,
  positive: {
    schema: z.number().positive(),
    parse: floatIn(0, Number.POSITIVE_INFINITY, { open: 'min' }),
  } as Kind<number>,
  nonNegative: {
    schema: z.number().nonnegative(),
    parse: floatIn(0, Number.POSITIVE_INFINITY),
  } as Kind<number>,
  fraction: { schema: z.number().min(0).max(1), parse: floatIn(0, 1) } as Kind<number>,
  oneOf: <const T extends string>(values: readonly T[]): Kind<T> => ({
    schema: z.enum(values as readonly [T, ...T[]]) as unknown as z.ZodType<T>,
    parse: oneOf(values),
  }),
  nullable: <T>(kind: Kind<T>): Kind<T | null> => ({
    schema: kind.schema.nullable(),
    ...(kind.parse ? { parse: kind.parse } : {}),
  }),
};

/** How a key appears on the command line. */
interface FlagText {
  help: string;
  /** the value's name in --help: `--lr <lr>` (a switch has none) */
  arg?: string;
  /** a switch with a --no- form: that form's help */
  no?: string;
}

interface Entry<T> {
  kind: Kind<T>;
  /** undefined: no default (--model: required unless --resume) */
  default: T | undefined;
  flag?: FlagText;
}

const key = <T>(kind: Kind<T>, value: T): Entry<T> => ({ kind, default: value });
const flag = <T>(kind: Kind<T>, value: T | undefined, text: FlagText): Entry<T> & { flag: FlagText } => ({
  kind,
  default: value,
  flag: text,
});

/**
 * Every option of polar train. Defaults follow shared/reference/grpo.md (Polar's recipe: lr 1e-6
 * constant, betas 0.9/0.98, wd 0.1, clip 0.2/0.28, TIS); docs/train.md lists them.
 */
export const TRAIN_OPTIONS = {
  model: flag(kinds.text, undefined, {
    arg: 'id|dir',
    help: 'Hugging Face model id or directory (tiny:arch=qwen3,... for a tiny random model of a real class)',
  }),
  device: flag(kinds.oneOf(trainDevices), 'cuda', { arg: 'device', help: 'cuda or cpu' }),
  gpus: flag(kinds.positiveInt, 1, { arg: 'n', help: 'data-parallel GPUs (FSDP through torchrun)' }),
  nproc: flag(kinds.positiveInt, 1, {
    arg: 'n',
    help: 'data-parallel processes with --device cpu (FSDP over gloo through torchrun)',
  }),
  lora: flag(kinds.switch, false, {
    help: 'train LoRA adapters (peft); the frozen base is the KL reference',
  }),
  lora_r: key(kinds.positiveInt, 16),
  lora_alpha: key(kinds.positive, 32),
  lora_dropout: key(kinds.fraction, 0),
  lora_target_modules: key<string | string[]>(
    { schema: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]) },
    'all-linear',
  ),
  lr: flag(kinds.positive, 1e-6, { arg: 'lr', help: 'learning rate' }),
  min_lr_ratio: key(kinds.fraction, 0),
  warmup_steps: flag(kinds.nonNegativeInt, 0, { arg: 'n', help: 'linear warm-up, in optimiser updates' }),
  schedule: flag(kinds.oneOf(learningRateSchedules), 'constant', {
    arg: 'kind',
    help: 'learning-rate schedule',
  }),
  weight_decay: key(kinds.nonNegative, 0.1),
  adam_betas: key<[number, number]>(
    { schema: z.tuple([z.number().min(0).max(1), z.number().min(0).max(1)]) },
    [0.9, 0.98],
  ),
  adam_eps: key(kinds.positive, 1e-8),
  grad_clip: key(kinds.nonNegative, 1.0),
  epochs: flag(kinds.positiveInt, 1, { arg: 'n', help: 'passes over the trajectory file' }),
  max_steps: flag(kinds.nullable(kinds.positiveInt), null, { arg: 'n', help: 'stop after n steps' }),
  batch_rollouts: flag(kinds.positiveInt, 144, { arg: 'n', help: 'rollouts per step' }),
  mini_batches: flag(kinds.positiveInt, 1, { arg: 'n', help: 'optimiser updates per epoch of a step' }),
  ppo_epochs: flag(kinds.positiveInt, 1, { arg: 'n', help: 'optimisation epochs over each step' }),
  shuffle: key(kinds.switch, true),
  clip_low: flag(kinds.fraction, 0.2, { arg: 'eps', help: 'lower ratio clip' }),
  clip_high: flag(kinds.nonNegative, 0.28, { arg: 'eps', help: 'upper ratio clip' }),
  loss_agg: flag(kinds.oneOf(lossAggregations), 'token-mean', { arg: 'mode', help: 'loss aggregation' }),
  loss_norm_tokens: key(kinds.nullable(kinds.positiveInt), null),
  advantage: flag(kinds.oneOf(trainAdvantages), 'grpo', {
    arg: 'kind',
    help: `the advantage estimator over each group's rewards: ${trainAdvantages.join(', ')} (docs/train.md)`,
  }),
  // null: each trajectory's own (polar build --overlong, recorded as its `overlong`), else DEFAULTS.overlong
  overlong: flag(kinds.nullable(kinds.oneOf(OVERLONG_MODES)), null, {
    arg: 'mode',
    help: `overlong traces (a call at max tokens, a trace build cut): ${OVERLONG_MODES.join(', ')} (default: what polar build recorded in each trajectory, else ${DEFAULTS.overlong.shown}; docs/train.md)`,
  }),
  overlong_buffer: flag(kinds.nullable(kinds.positiveInt), null, {
    arg: 'n',
    help: `with overlong penalty: DAPO's L_cache in tokens (default: each trajectory's, else ${DEFAULTS.overlongBuffer.shown})`,
  }),
  tis: flag(kinds.switch, true, {
    help: 'truncated importance sampling against the captured logprobs',
    no: 'no off-policy correction (accepts traces without logprobs)',
  }),
  tis_cap: flag(kinds.positive, 2.0, { arg: 'c', help: 'TIS weight cap' }),
  /** mean |trainer - sampling| logprob per token on the first batch beyond which training refuses (0: no check) */
  sampling_gap_limit: key(kinds.nonNegative, 2.0),
  /**
   * polar loop --max-staleness: the policy version this training starts from, and how many versions a
   * trajectory's `policy_version` may lag it; a staler trajectory is refused (null: no check)
   */
  policy_version: key(kinds.nullable(kinds.nonNegativeInt), null),
  max_staleness: key(kinds.nullable(kinds.nonNegativeInt), null),
  kl_coef: flag(kinds.nonNegative, 0, { arg: 'beta', help: 'k3 KL coefficient to the reference model' }),
  micro_batch_tokens: flag(kinds.positiveInt, 16384, {
    arg: 'n',
    help: 'token budget of one packed micro-batch',
  }),
  logprob_chunk: flag(kinds.positiveInt, 1024, {
    arg: 'n',
    help: 'tokens per chunk when computing logprobs',
  }),
  // null: on with --device cuda, off on the CPU (config.ts)
  bf16: flag(kinds.nullable(kinds.switch), null, {
    help: 'bf16 autocast (default on cuda)',
    no: 'fp32 compute',
  }),
  gradient_checkpointing: flag(kinds.switch, true, {
    help: 'recompute activations in backward',
    no: 'keep activations',
  }),
  save_every: flag(kinds.nonNegativeInt, 10, {
    arg: 'n',
    help: 'checkpoint every n steps (always at the end)',
  }),
  seed: flag(kinds.nonNegativeInt, 0, { arg: 'n', help: 'data order seed' }),
};

type Table = typeof TRAIN_OPTIONS;
export type TrainKey = keyof Table;
type ValueOf<E> = E extends Entry<infer T> ? T : never;

/** What a user may set in train.json (and through flags). Unknown keys are an error. */
export const trainOptionsSchema = z.strictObject(
  Object.fromEntries(Object.entries(TRAIN_OPTIONS).map(([k, e]) => [k, e.kind.schema])) as {
    [K in TrainKey]: z.ZodType<ValueOf<Table[K]>>;
  },
);
export type TrainOptions = { [K in TrainKey]: ValueOf<Table[K]> };

/** Every default but --model's: what the worker falls back to (schema.json) and --help shows. */
export const TRAIN_DEFAULTS: Omit<TrainOptions, 'model'> = Object.fromEntries(
  Object.entries(TRAIN_OPTIONS)
    .filter(([k]) => k !== 'model')
    .map(([k, e]) => [k, e.default]),
) as Omit<TrainOptions, 'model'>;

/** `batch_rollouts` -> `batchRollouts` (commander's name for `--batch-rollouts`) */
type Camel<S extends string> = S extends `${infer H}_${infer T}` ? `${H}${Capitalize<Camel<T>>}` : S;
const camel = (k: string): string => k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
const kebab = (k: string): string => k.replaceAll('_', '-');

type FlagKey = { [K in TrainKey]: Table[K] extends { flag: FlagText } ? K : never }[TrainKey];
/** the keys that have a flag */
export const TRAIN_FLAG_KEYS = (Object.keys(TRAIN_OPTIONS) as TrainKey[]).filter(
  (k) => TRAIN_OPTIONS[k].flag !== undefined,
) as FlagKey[];

/** The train options' flags after parsing, as commander names them; undefined = not given. */
export type TrainOptionFlags = { [K in FlagKey as Camel<K>]?: Exclude<ValueOf<Table[K]>, null> };

/** The commander options of one key: `--key <arg>` (a switch: `--key`, and `--no-key` when it has one). */
export function trainOption(k: FlagKey, help?: string): Option[] {
  const entry = TRAIN_OPTIONS[k] as Entry<unknown>;
  const text = entry.flag!;
  const value = entry.default;
  const name = `--${kebab(k)}`;
  if (text.arg === undefined) {
    const on = new Option(name, `${help ?? text.help}${value === true ? ' (default)' : ''}`);
    return text.no ? [on, new Option(`--no-${kebab(k)}`, text.no)] : [on];
  }
  const shown = value === null || value === undefined ? '' : ` (default: ${String(value)})`;
  const option = new Option(`${name} <${text.arg}>`, `${help ?? text.help}${shown}`);
  return [entry.kind.parse ? option.argParser(entry.kind.parse) : option];
}

/** The options of every key with a flag, in the table's order, but those `except` names. */
export function trainFlagOptions(except: readonly FlagKey[] = []): Option[] {
  return TRAIN_FLAG_KEYS.filter((k) => !except.includes(k)).flatMap((k) => trainOption(k));
}

/** The flags as config keys (undefined = not given: train.json or the default applies). */
export function flagsToOptions(flags: TrainOptionFlags): Partial<Record<TrainKey, unknown>> {
  const named = flags as Record<string, unknown>;
  return Object.fromEntries(TRAIN_FLAG_KEYS.map((k) => [k, named[camel(k)]]));
}

/**
 * Config keys as `polar train` flags, the inverse of flagsToOptions (undefined: not given): a loop step's
 * `polar train` on other nodes (src/train/cluster/train.ts). A switch is `--key`, or `--no-key` when false and
 * it has that form (false without one is the switch not given); a key without a flag is refused.
 */
export function optionsToFlags(options: Partial<Record<TrainKey, unknown>>): string[] {
  const argv: string[] = [];
  for (const [k, value] of Object.entries(options) as Array<[TrainKey, unknown]>) {
    if (value === undefined || value === null) continue; // null: the key's own default
    const text = (TRAIN_OPTIONS[k] as Entry<unknown> | undefined)?.flag;
    if (!text) throw new Error(`train option ${k} has no flag`);
    const name = `--${kebab(k)}`;
    if (text.arg !== undefined) argv.push(name, String(value));
    else if (value === true) argv.push(name);
    else if (value === false && text.no) argv.push(`--no-${kebab(k)}`);
  }
  return argv;
}
