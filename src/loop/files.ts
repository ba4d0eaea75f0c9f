/**
 * The layout of a loop's run folder (`polar loop --out DIR`), named once for the loop, `--resume` and
 * `polar inspect`, and the schema of step.json. docs/loop.md, "The run folder", describes each entry.
 */
import { z } from 'zod';
import { stepHealthSchema } from './health.ts';

/** What `polar loop` says to do after a stop: the hint of every interrupt of a loop (phases.ts, cluster.ts, command.ts). */
export const LOOP_RESUME_HINT =
  "run the same command with --resume to continue: finished steps, and the unfinished step's graded rollouts, finished training and export, are kept";

export const LOOP_FILES = {
  /** the resolved options of the run, checked again by --resume */
  config: 'loop.json',
  /** step-N/step.json: the step's summary, written last (a step without it is not done) */
  step: 'step.json',
  /** step-N/eval/: the step's rollouts, an evaluation folder (src/rollout/run/files.ts); eval-R/: extra round R */
  rollouts: 'eval',
  /** step-N/draws.json: with --dynamic-sampling, each round's tasks, written before it runs */
  draws: 'draws.json',
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

/** N of a folder named step-N (stepDirName); null for any other name. */
export function stepNumber(name: string): number | null {
  const m = /^step-(\d+)$/.exec(name);
  return m ? Number(m[1]) : null;
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
  /** pass_at_1 null only when no rollout has a result (src/rollout/run/report.ts) */
  rollouts: z.object({ pass_at_1: z.number().nullable(), samples: z.number().int().nonnegative() }),
  heldout: z.object({ pass_at_1: z.number().nullable() }).nullable(),
  trajectories: z.number().int().nonnegative(),
  trainable_tokens: z.number().int().nonnegative(),
  /** overlong traces of the step's rollouts (polar build's counts; absent in older step.json) */
  overlong: z
    .object({
      /** calls that ended at their max tokens */
      calls: z.number().int().nonnegative(),
      /** traces a length limit cut */
      traces: z.number().int().nonnegative(),
      /** of those, traces --overlong mask takes out of the loss */
      masked: z.number().int().nonnegative(),
      /** rollouts whose reward --overlong penalty lowers */
      penalised: z.number().int().nonnegative(),
    })
    .optional(),
  /** with --dynamic-sampling N > 0 (src/loop/dynamic-sampling.ts) */
  dynamic_sampling: z
    .object({
      /** extra rounds run */
      rounds: z.number().int().nonnegative(),
      /** tasks drawn in them, beyond the step's own */
      drawn: z.number().int().nonnegative(),
      /** uniform groups left out of training */
      dropped: z.number().int().nonnegative(),
      /** informative groups trained on (the quota is --tasks-per-step) */
      informative: z.number().int().nonnegative(),
      /** training-set rows the step took: the next step starts after them */
      rows: z.number().int().nonnegative(),
    })
    .optional(),
  /** the step's rollout health (src/loop/health.ts); absent in steps written before polar 0.1.0's round 4 */
  health: stepHealthSchema.optional(),
  /**
   * --max-staleness >= 1: over the step's samples, staleness = (step - 1) - the policy version that
   * sampled it; carried: samples of groups launched for an earlier step; dropped: samples of groups too
   * stale for this step, or (--overdue drop) cancelled at it as overdue, never trained (absent in a
   * --max-staleness 0 run: all 0)
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
