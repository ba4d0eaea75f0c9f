/**
 * Group advantages for GRPO and its variants (shared/reference/grpo.md). One value per rollout (session);
 * every trace of the rollout carries it. Pure functions over a group's rewards.
 *   grpo     A_i = (R_i - mean(R)) / (std(R) + eps), unbiased std (DeepSeekMath)
 *   dr-grpo  A_i = R_i - mean(R) (Dr. GRPO: no std normalisation)
 *   rloo     A_i = R_i - mean of the other G-1 rewards (leave-one-out)
 *   none     no advantage (null): the trainer computes its own
 * A group of one has no baseline: its advantage is 0 for every estimator except none.
 */
export const advantageKinds = ['grpo', 'dr-grpo', 'rloo', 'none'] as const;
export type AdvantageKind = (typeof advantageKinds)[number];

export const GRPO_EPS = 1e-6;

export function mean(values: readonly number[]): number {
  let s = 0;
  for (const v of values) s += v;
  return s / values.length;
}

/** Unbiased (n-1) standard deviation; 0 for fewer than two values. */
export function stdUnbiased(values: readonly number[]): number {
  if (values.length < 2) return 0;
  const m = mean(values);
  let s = 0;
  for (const v of values) s += (v - m) * (v - m);
  return Math.sqrt(s / (values.length - 1));
}

/** The advantage of each member of a group, in the order of `rewards`; null for `none`. */
export function groupAdvantages(rewards: readonly number[], kind: AdvantageKind): (number | null)[] {
  const n = rewards.length;
  if (kind === 'none') return rewards.map(() => null);
  if (n < 2) return rewards.map(() => 0);
  const m = mean(rewards);
  switch (kind) {
    case 'grpo': {
      const sd = stdUnbiased(rewards);
      return rewards.map((r) => (r - m) / (sd + GRPO_EPS));
    }
    case 'dr-grpo':
      return rewards.map((r) => r - m);
    case 'rloo': {
      const total = m * n;
      return rewards.map((r) => r - (total - r) / (n - 1));
    }
    default: {
      const never: never = kind;
      throw new Error(`unknown advantage kind ${String(never)}`);
    }
  }
}

/** Whether every reward of the group is the same (no learning signal: GRPO advantage 0). */
export function isUniform(rewards: readonly number[]): boolean {
  return rewards.every((r) => r === rewards[0]);
}
