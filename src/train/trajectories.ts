/**
 * Checks a trajectory file for training before any GPU time is spent: every line valid (trajectory record
 * v1), something to train on (reward or advantage), sampling logprobs present when TIS is on, every trace
 * within the micro-batch token budget. Returns the numbers the launcher and the progress display need.
 */
import { InputError } from '../errors.ts';
import { isUniform } from '../trajectory/advantage.ts';
import { readTrajectories } from '../trajectory/reader.ts';

export interface TrajectoryCheck {
  /** fail on the first trace without sampling logprobs (TIS on) */
  requireLogprobs: boolean;
  /** the longest trace (prompt + response) allowed */
  maxTraceTokens: number;
}

export interface TrajectorySummary {
  rollouts: number;
  traces: number;
  tokens: number;
  trainedTokens: number;
  maxTraceTokens: number;
  /** the most trained tokens of one rollout (all its traces): Dr. GRPO's default constant normaliser */
  maxTrainedPerRollout: number;
  /** rollouts whose advantage the worker computes from rewards */
  withoutAdvantage: number;
  /** rollouts with a non-zero advantage (given, or computed from a group with unequal rewards) */
  learnable: number;
  /** groups (group_id, else task_id) of the rollouts without an advantage */
  groups: number;
}

export async function checkTrajectories(file: string, check: TrajectoryCheck): Promise<TrajectorySummary> {
  const s: TrajectorySummary = {
    rollouts: 0,
    traces: 0,
    tokens: 0,
    trainedTokens: 0,
    maxTraceTokens: 0,
    maxTrainedPerRollout: 0,
    withoutAdvantage: 0,
    learnable: 0,
    groups: 0,
  };
  // rewards of the rollouts without an advantage, per group: the worker's advantage is 0 in a uniform group
  const rewards = new Map<string, number[]>();
  for await (const { record, line } of readTrajectories(file)) {
    s.rollouts++;
    if (record.advantage !== null && record.advantage !== 0) s.learnable++;
    if (record.advantage === null && record.reward !== null) {
      const key = record.group_id ?? record.task_id ?? `rollout-${s.rollouts}`;
      const group = rewards.get(key);
      if (group) group.push(record.reward);
      else rewards.set(key, [record.reward]);
    }
    if (record.advantage === null) {
      s.withoutAdvantage++;
      if (record.reward === null) {
        throw new InputError(
          file,
          line,
          'reward',
          'reward and advantage are both null: nothing to train on',
          'score the rollouts before training (polar build with rewards), or drop unscored lines',
        );
      }
    }
    let trainedHere = 0;
    record.traces.forEach((trace, i) => {
      s.traces++;
      const n = trace.prompt_ids.length + trace.response_ids.length;
      s.tokens += n;
      s.maxTraceTokens = Math.max(s.maxTraceTokens, n);
      for (const m of trace.loss_mask) trainedHere += m;
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
          'raise --micro-batch-tokens, or rebuild the trajectories with a lower --max-tokens',
        );
      }
    });
    s.trainedTokens += trainedHere;
    s.maxTrainedPerRollout = Math.max(s.maxTrainedPerRollout, trainedHere);
  }
  if (s.rollouts === 0) throw new InputError(file, undefined, undefined, 'no trajectory records');
  s.groups = rewards.size;
  for (const group of rewards.values()) if (!isUniform(group)) s.learnable += group.length;
  if (s.trainedTokens === 0) {
    throw new InputError(
      file,
      undefined,
      'loss_mask',
      'no trace has a token with mask 1: nothing to train on',
    );
  }
  return s;
}
