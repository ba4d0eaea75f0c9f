/**
 * Checks a trajectory file for training before any GPU time is spent: every line valid (trajectory record
 * v1 or v2), a reward on every rollout (the worker computes the advantages from the rewards and groups),
 * sampling logprobs present when TIS is on, every trace within the micro-batch token budget, and some
 * group whose rewards differ (after --overlong: masked traces train nothing, the penalty is a reward) (else every advantage is 0, whatever the estimator). Returns the numbers
 * the launcher and the progress display need.
 */
import { InputError } from '../errors.ts';
import { DEFAULTS, type OverlongMode } from '../options/defaults.ts';
import { isOverlong, overlongPenalty, rolloutHeadroom } from '../trajectory/overlong.ts';
import { readTrajectories } from '../trajectory/reader.ts';
import type { TrajectoryRecord } from '../trajectory/record.ts';
import { isUniform } from '../trajectory/rewards.ts';
import type { TrainOptions } from './options.ts';

export interface TrajectoryCheck {
  /** fail on the first trace without sampling logprobs (TIS on) */
  requireLogprobs: boolean;
  /** the longest trace (prompt + response) allowed */
  maxTraceTokens: number;
  /** the training model's vocabulary, when known: every id must be below it (checked line by line) */
  vocab?: { size: number; model: string };
  /** train's --overlong and --overlong-buffer (null: each record's own), applied as the worker will */
  overlong?: { mode: OverlongMode | null; buffer: number | null };
}

export interface TrajectorySummary {
  rollouts: number;
  traces: number;
  tokens: number;
  trainedTokens: number;
  maxTraceTokens: number;
  /** the most trained tokens of one rollout (all its traces): Dr. GRPO's default constant normaliser */
  maxTrainedPerRollout: number;
  /** rollouts in a group whose rewards differ: the ones with a non-zero advantage */
  learnable: number;
  /** GRPO groups (group_id; a rollout without one is a group of its own) */
  groups: number;
  /** the distinct `model` of the records: the models that sampled them */
  models: string[];
}

/** A token id the model has no row for: the trajectories come from another tokenizer (another model). */
function outsideVocab(
  file: string,
  line: number,
  i: number,
  trace: { prompt_ids: number[]; response_ids: number[] },
  vocab: { size: number; model: string },
): void {
  for (const field of ['prompt_ids', 'response_ids'] as const) {
    const bad = trace[field].find((id) => id >= vocab.size);
    if (bad === undefined) continue;
    throw new InputError(
      file,
      line,
      `traces.${i}.${field}`,
      `token id ${bad} is outside the vocabulary of ${vocab.model} (${vocab.size} ids): these trajectories come from another tokenizer`,
      'train the model that sampled them (--model), or capture again with this model',
    );
  }
}

/** The checks of a resolved config: TIS's logprobs, the micro-batch budget, --overlong, the vocabulary when known. */
export function trajectoryCheck(
  config: Pick<TrainOptions, 'tis' | 'micro_batch_tokens' | 'overlong' | 'overlong_buffer'>,
  vocab: number | null,
  model: string,
): TrajectoryCheck {
  return {
    requireLogprobs: config.tis,
    maxTraceTokens: config.micro_batch_tokens,
    overlong: { mode: config.overlong, buffer: config.overlong_buffer },
    ...(vocab !== null ? { vocab: { size: vocab, model } } : {}),
  };
}

/** The record's overlong mode and buffer as the worker resolves them: train's, else the record's, else the defaults. */
function overlongOf(
  record: TrajectoryRecord,
  given: TrajectoryCheck['overlong'],
): { mode: OverlongMode; buffer: number } {
  return {
    mode: given?.mode ?? record.overlong?.mode ?? DEFAULTS.overlong.value,
    buffer: given?.buffer ?? record.overlong?.buffer ?? DEFAULTS.overlongBuffer.value,
  };
}

const REWARD_HINT =
  'score the rollouts before building (polar eval grades them; polar build --rewards FILE), or drop unscored lines';

export async function checkTrajectories(file: string, check: TrajectoryCheck): Promise<TrajectorySummary> {
  const s: TrajectorySummary = {
    rollouts: 0,
    traces: 0,
    tokens: 0,
    trainedTokens: 0,
    maxTraceTokens: 0,
    maxTrainedPerRollout: 0,
    learnable: 0,
    groups: 0,
    models: [],
  };
  // the rewards of each group: the worker's advantages are 0 in a uniform group (and a group of one)
  const rewards = new Map<string, number[]>();
  const models = new Set<string>();
  let maskedOverlong = 0;
  for await (const { record, line } of readTrajectories(file)) {
    s.rollouts++;
    models.add(record.model);
    // a v1 record may carry an older build's advantage: the worker computes its own (and says so)
    const recorded = record.v === 1 ? record.advantage : null;
    if (record.reward === null) {
      throw new InputError(
        file,
        line,
        'reward',
        recorded === null
          ? 'null: nothing to train on (polar train computes the advantage from the rewards of its group)'
          : 'null, with an advantage from an older polar build (trajectory v1): polar train computes the advantages itself, from the rewards of each group',
        recorded === null
          ? REWARD_HINT
          : 'rebuild the trajectories with this polar (polar build), with their rewards',
      );
    }
    // what the worker trains (polar_train/overlong.py): masked overlong traces, the length penalty
    const overlong = overlongOf(record, check.overlong);
    const reward =
      overlong.mode === 'penalty'
        ? record.reward + overlongPenalty(rolloutHeadroom(record.traces), overlong.buffer)
        : record.reward;
    const key = record.group_id ?? `\0rollout-${s.rollouts}`;
    const group = rewards.get(key);
    if (group) group.push(reward);
    else rewards.set(key, [reward]);
    let trainedHere = 0;
    record.traces.forEach((trace, i) => {
      s.traces++;
      const n = trace.prompt_ids.length + trace.response_ids.length;
      s.tokens += n;
      s.maxTraceTokens = Math.max(s.maxTraceTokens, n);
      if (overlong.mode === 'mask' && isOverlong(trace)) maskedOverlong++;
      else for (const m of trace.loss_mask) trainedHere += m;
      if (check.vocab) outsideVocab(file, line, i, trace, check.vocab);
      if (check.requireLogprobs && trace.response_logprobs === null) {
        throw new InputError(
          file,
          line,
          `traces[${i}].response_logprobs`,
          'null (this trace is not token-exact), but the off-policy correction (TIS) needs the sampling logprobs',
          'capture with logprobs, or train without the correction: --no-tis',
        );
      }
      if (n > check.maxTraceTokens) {
        throw new InputError(
          file,
          line,
          `traces[${i}]`,
          `${n} tokens exceed the micro-batch budget of ${check.maxTraceTokens}`,
          'raise --micro-batch-tokens, or rebuild the trajectories with a lower --max-trace-tokens',
        );
      }
    });
    s.trainedTokens += trainedHere;
    s.maxTrainedPerRollout = Math.max(s.maxTrainedPerRollout, trainedHere);
  }
  if (s.rollouts === 0) throw new InputError(file, undefined, undefined, 'no trajectory records');
  s.groups = rewards.size;
  s.models = [...models];
  for (const group of rewards.values()) if (!isUniform(group)) s.learnable += group.length;
  if (s.trainedTokens === 0) {
    throw new InputError(
      file,
      undefined,
      'loss_mask',
      'no trace has a token with mask 1: nothing to train on',
      maskedOverlong > 0
        ? `${maskedOverlong} overlong traces are masked (--overlong mask): raise the max tokens, or train with --overlong penalty or keep`
        : undefined,
    );
  }
  return s;
}
