/**
 * The layout of a loop's run folder (`polar loop --out DIR`), named once for the loop, `--resume` and
 * `polar inspect`, and the schema of step.json. docs/loop.md, "The run folder", describes each entry.
 */
import { z } from 'zod';

export const LOOP_FILES = {
  /** the resolved options of the run, checked again by --resume */
  config: 'loop.json',
  /** step-N/step.json: the step's summary, written last (a step without it is not done) */
  step: 'step.json',
  /** step-N/eval/: the step's rollouts, an evaluation folder (src/eval/files.ts) */
  rollouts: 'eval',
  /** step-N/traj.jsonl: the trajectories built from the rollouts */
  trajectories: 'traj.jsonl',
  /** step-N/build-stats.json: polar build's report for them */
  buildStats: 'build-stats.json',
  /** step-N/train/: the trainer's run directory (checkpoints, metrics.jsonl) */
  train: 'train',
  /** step-N/onnx/: the published model for the embedded backend */
  onnx: 'onnx',
  /** step-N/heldout/: the held-out evaluation after the step (step-0/heldout: the starting policy's) */
  heldout: 'heldout',
  /** --max-staleness >= 1: the schedule journal, written ahead (src/loop/async.ts) */
  schedule: 'schedule.jsonl',
  /** --max-staleness >= 1: groups/g-NNNNNN/, one evaluation folder per GRPO group */
  groups: 'groups',
} as const;

/** step-N */
export function stepDirName(n: number): string {
  return `step-${n}`;
}

/** groups/g-NNNNNN (--max-staleness >= 1) */
export function groupDirName(group: number): string {
  return `g-${String(group).padStart(6, '0')}`;
}

/** step-N/step.json (LOOP_FILES.step): the step's summary, written last by src/loop/loop.ts; --resume and
 * `polar inspect` read it. */
export const stepSummarySchema = z.object({
  step: z.number().int().nonnegative(),
  status: z.literal('done'),
  started_at: z.string(),
  ended_at: z.string(),
  /** the policy that ran the rollouts (step-(N-1)) */
  policy: z.string(),
  checkpoint: z.string(),
  tasks: z.array(z.string()),
  /** pass_at_1 null only when no rollout has a result (src/eval/report.ts) */
  rollouts: z.object({ pass_at_1: z.number().nullable(), samples: z.number().int().nonnegative() }),
  heldout: z.object({ pass_at_1: z.number().nullable() }).nullable(),
  trajectories: z.number().int().nonnegative(),
  trainable_tokens: z.number().int().nonnegative(),
  /**
   * --max-staleness >= 1: over the step's samples, staleness = (step - 1) - the policy version that
   * sampled it; carried: samples of groups launched for an earlier step; dropped: samples of groups too
   * stale for this step, never trained (absent in a --max-staleness 0 run: all 0)
   */
  staleness: z
    .object({
      max: z.number().int().nonnegative(),
      mean: z.number().nonnegative(),
      carried: z.number().int().nonnegative(),
      dropped: z.number().int().nonnegative(),
    })
    .optional(),
  /** --max-staleness >= 1: the groups trained, with the version each sample started under */
  groups: z
    .array(
      z.object({
        group: z.number().int().nonnegative(),
        task: z.string(),
        meant_for: z.number().int().nonnegative(),
        policy_versions: z.array(z.number().int().nonnegative()),
      }),
    )
    .optional(),
});
export type StepSummary = z.infer<typeof stepSummarySchema>;
