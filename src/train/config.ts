/**
 * `polar train`'s config: the user's train.json read against the options' strict schema, and the merge
 * (defaults < --config file < flags) into the resolved config that the Python worker reads and that is
 * written to <out>/config.json. The options themselves (keys, types, defaults, flags) are declared once,
 * in src/train/options.ts. Keys are snake_case, the same as the worker's (polar_train/trainer.py).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { z } from 'zod';
import { InputError, UsageError } from '../errors.ts';
import { readConfigFile } from '../options/config.ts';
import type { ReportFlags } from '../options/report.ts';
import { firstIssue } from '../util/zod.ts';
import { TRAIN_DEFAULTS, type TrainOptionFlags, type TrainOptions, trainOptionsSchema } from './options.ts';
import { CHECKPOINT_FILES } from './schema.ts';

export const userConfigSchema = trainOptionsSchema.partial();
export type UserTrainConfig = z.infer<typeof userConfigSchema>;

/** The file the worker reads: every option resolved, plus the run's inputs. */
export interface ResolvedTrainConfig extends TrainOptions {
  polar_train_config: 1;
  trajectories: string;
  out: string;
  resume: string | null;
  bf16: boolean;
}

/**
 * A train.json (or YAML) read against the options' strict schema: keys snake_case as the worker names them
 * (kebab case, the flags' spelling, is read as the same key).
 */
export async function readUserConfig(file: string): Promise<UserTrainConfig> {
  return checkUserConfig(readConfigFile(file), file);
}

/** Train options by key (either spelling) checked against the strict schema; `file` is named in an error. */
export function checkUserConfig(options: Record<string, unknown>, file: string): UserTrainConfig {
  const value = Object.fromEntries(Object.entries(options).map(([k, v]) => [k.replaceAll('-', '_'), v]));
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
  /** the file's path and the flag that named it (--config, --train-config), for the refusals that name it */
  configFile?: { path: string; flag: string } | undefined;
  /** a run across nodes: how many, and the flag that asked for them (--nnodes, --train-nodes) */
  nodes?: { count: number; flag: string } | undefined;
}

/** What set `lora: true`, for a refusal that names it and its fix: the flag, else the config file's key. */
function loraFrom(inputs: ResolveInputs): { what: string; fix: string } {
  if (inputs.flags.lora === true) return { what: '--lora', fix: 'drop --lora' };
  const file = inputs.configFile;
  return file
    ? { what: `"lora": true in ${file.flag} ${file.path}`, fix: `set "lora" to false in ${file.path}` }
    : { what: '"lora": true in the config file', fix: 'set "lora" to false in the config file' };
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
      `${loraFrom(inputs).what} with --gpus > 1 or --nproc > 1 is not supported yet`,
      'LoRA of a 4B-class model fits one GPU: use --gpus 1',
    );
  }
  // LoRA trains in one process: the worker merges and saves the adapter from its own whole copy of the
  // model (polar_train/model.py save_pretrained), which FSDP over the processes of several nodes shards
  if (o.lora && inputs.nodes && inputs.nodes.count > 1) {
    const { what, fix } = loraFrom(inputs);
    const { flag, count } = inputs.nodes;
    throw new UsageError(
      `${what} with ${flag} ${count} is not supported: LoRA trains in one process (as with --gpus > 1), not across nodes`,
      `${fix} to train the whole model across the nodes, or leave ${flag} at 1 to train LoRA on one machine`,
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
export interface TrainFlags extends TrainOptionFlags, ReportFlags {
  /** -q: no progress on stderr */
  quiet?: boolean;
  out: string;
  /** --resume: continue the run in --out (true); a directory is the deprecated form of --resume-from */
  resume?: boolean | string;
  /** --resume-from DIR: start from a checkpoint (a step-N directory or another run's --out) */
  resumeFrom?: string;
  config?: string;
  /** the --config file's train.json keys that have no flag (lora_r, adam_betas, ...): src/options/config.ts */
  configKeys?: Record<string, unknown>;
  python?: string;
  json?: boolean;
  /** a run across nodes (torchrun): nodes, this node's rank, node 0's rendezvous HOST:PORT */
  nnodes?: number;
  nodeRank?: number;
  rdzvEndpoint?: string;
  localAddr?: string;
  socketIfname?: string;
  rdzvId?: string;
  /** --allow-zero-advantage: train when every advantage is 0 (a loop step's training on other nodes) */
  allowZeroAdvantage?: boolean;
  /** --sampled-by: model names that serve the trained weights (a loop's served model) */
  sampledBy?: string[];
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
