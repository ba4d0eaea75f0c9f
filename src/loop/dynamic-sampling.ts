/**
 * DAPO's dynamic sampling in `polar loop --dynamic-sampling N` (issue 30, part 4; Yu et al. 2025,
 * arXiv:2503.14476, section 3.2; shared/reference/grpo.md): a group whose rewards are all equal has every
 * advantage 0 and teaches GRPO nothing. After a step's rollouts, while fewer of its groups are informative
 * than the step's quota (--tasks-per-step) and fewer than N extra rounds ran, the step draws as many more
 * tasks as it is short of, the next unused rows of the training set, and rolls them out (step-N/eval-R/).
 * The step then trains on the informative groups only (the uniform ones are dropped, as polar build
 * --drop-uniform-groups does). As verl's DAPO recipe (recipe/dapo/dapo_ray_trainer.py, max_num_gen_batches)
 * it gives up after N extra rounds and trains on what it has; unlike it, a round draws only the shortfall.
 *
 * The training set is read in one order: step n starts at the row after the last one the steps before
 * it drew (step.json `dynamic_sampling.rows`; without dynamic sampling a step draws --tasks-per-step rows,
 * the rotation of tasksForStep). Each round's tasks are written to step-N/draws.json before they run; an
 * unfinished step redone by --resume reuses the rounds recorded there, so it rolls out the same tasks.
 * With N = 0 (the default) nothing here runs and the loop is the loop without it.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import type { OverlongMode } from '../options/defaults.ts';
import type { SweInstance } from '../rollout/dataset.ts';
import { buildTrajectories } from '../trajectory/build.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import { PRIVATE_FILE } from '../util/private-files.ts';
import { LOOP_FILES, type StepSummary } from './files.ts';

/** step-N/eval (round 0, the step's own tasks), step-N/eval-1, eval-2, ... (extra rounds) */
export function roundDirName(round: number): string {
  return round === 0 ? LOOP_FILES.rollouts : `${LOOP_FILES.rollouts}-${round}`;
}

const roundSchema = z.object({
  round: z.number().int().nonnegative(),
  /** the training-set rows this round took, [from, to) before wrapping around */
  rows: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]),
  tasks: z.array(z.string()),
});
/** step-N/draws.json (LOOP_FILES.draws): the rounds of a step, each written before it runs */
export const drawsSchema = z.object({ rounds: z.array(roundSchema) });
export type Round = z.infer<typeof roundSchema>;

/** What step.json says about dynamic sampling (only with --dynamic-sampling N > 0): files.ts. */
export type DynamicSamplingSummary = NonNullable<StepSummary['dynamic_sampling']>;

/** The first training-set row of the step after `done`: rows each took (perStep without dynamic sampling). */
export function nextRow(done: readonly StepSummary[], perStep: number): number {
  let row = 0;
  for (const s of done) row += s.dynamic_sampling?.rows ?? perStep;
  return row;
}

/**
 * `count` tasks from row `from` on, wrapping around the set, none already in `taken` (a task is one
 * group per step); fewer when the set runs out. Returns them and the row after the last one read.
 */
export function drawTasks(
  all: readonly SweInstance[],
  from: number,
  count: number,
  taken: ReadonlySet<string>,
): { tasks: SweInstance[]; to: number } {
  const tasks: SweInstance[] = [];
  let row = from;
  const seen = new Set(taken);
  while (tasks.length < count && row < from + all.length) {
    const task = all[row % all.length]!;
    row++;
    if (seen.has(task.instance_id)) continue;
    seen.add(task.instance_id);
    tasks.push(task);
  }
  return { tasks, to: row };
}

/** A step's own tasks with dynamic sampling: --tasks-per-step of them from `row` on. */
export function firstDraw(
  all: readonly SweInstance[],
  row: number,
  perStep: number,
): { tasks: SweInstance[]; rows: [number, number] } {
  const { tasks, to } = drawTasks(all, row, perStep, new Set());
  return { tasks, rows: [row, to] };
}

/** The rounds an unfinished attempt of this step recorded (read before the step's folder is cleared). */
export async function recordedDraws(stepDir: string): Promise<Round[]> {
  try {
    const parsed = drawsSchema.safeParse(JSON.parse(await readFile(join(stepDir, LOOP_FILES.draws), 'utf8')));
    return parsed.success ? parsed.data.rounds : [];
  } catch {
    return [];
  }
}

export interface SampleStepInput<R> {
  stepDir: string;
  step: number;
  trainSet: readonly SweInstance[];
  /** the step's own tasks (round 0) and the row after them */
  first: { tasks: SweInstance[]; rows: [number, number] };
  /** --tasks-per-step: informative groups wanted */
  quota: number;
  /** --dynamic-sampling N */
  extraRounds: number;
  /** rounds an interrupted attempt of this step recorded (recordedDraws), reused in order */
  recorded: readonly Round[];
  /** what polar build counts as the reward (the loop's build options) */
  overlong?: { mode: OverlongMode; buffer: number };
  /** runs one round's rollouts into `dir` (the loop's evaluate) */
  rollout: (tasks: SweInstance[], dir: string) => Promise<R>;
  /** after each round (the loop: a stop signal ends the step there) */
  afterRound?: () => void;
}

export interface SampledStep<R> {
  /** what round 0's rollout returned (the loop: its evaluation, whose report step.json shows) */
  rollouts: R;
  sampled: Sampled;
}

export interface Sampled {
  /** every round's folder, round 0 first: the inputs of the step's build */
  inputs: string[];
  /** every task rolled out, in order */
  tasks: SweInstance[];
  /** drop the uniform groups in the step's build: some group is informative */
  dropUniform: boolean;
  summary: DynamicSamplingSummary;
}

/** Informative groups of one round's rollouts: graded, rewards not all equal (polar build's judgement). */
async function informativeGroups(
  dir: string,
  overlong: SampleStepInput<unknown>['overlong'],
): Promise<{ informative: number; uniform: number }> {
  const stats = await buildTrajectories({
    inputs: [dir],
    output: null,
    groupBy: 'task_id',
    ...(overlong ? { overlong: overlong.mode, overlongBuffer: overlong.buffer } : {}),
  });
  const informative = stats.groups - stats.groups_uniform - stats.groups_without_reward;
  return { informative, uniform: stats.groups_uniform };
}

async function writeDraws(stepDir: string, rounds: readonly Round[]): Promise<void> {
  await writeFile(join(stepDir, LOOP_FILES.draws), `${JSON.stringify({ rounds }, null, 2)}\n`, {
    mode: PRIVATE_FILE,
  });
}

/** Round 0, then extra rounds until the quota of informative groups or N extra rounds. */
export async function sampleStep<R>(input: SampleStepInput<R>): Promise<SampledStep<R>> {
  const { stepDir, trainSet, quota } = input;
  const rounds: Round[] = [
    { round: 0, rows: input.first.rows, tasks: input.first.tasks.map((t) => t.instance_id) },
  ];
  await writeDraws(stepDir, rounds);
  const inputs = [join(stepDir, roundDirName(0))];
  const rollouts = await input.rollout(input.first.tasks, inputs[0]!);
  input.afterRound?.();
  const tasks = [...input.first.tasks];
  let { informative, uniform } = await informativeGroups(inputs[0]!, input.overlong);
  let row = input.first.rows[1];
  const byId = new Map(trainSet.map((t) => [t.instance_id, t]));
  for (let r = 1; r <= input.extraRounds && informative < quota; r++) {
    const again = input.recorded[r];
    const drawn = again
      ? { tasks: again.tasks.flatMap((id) => byId.get(id) ?? []), to: again.rows[1] }
      : drawTasks(trainSet, row, quota - informative, new Set(tasks.map((t) => t.instance_id)));
    if (drawn.tasks.length === 0) break; // every task of the set is in this step already
    rounds.push({ round: r, rows: [row, drawn.to], tasks: drawn.tasks.map((t) => t.instance_id) });
    await writeDraws(stepDir, rounds); // before the round runs: --resume redoes the same draws
    const dir = join(stepDir, roundDirName(r));
    inputs.push(dir);
    await input.rollout(drawn.tasks, dir);
    input.afterRound?.();
    tasks.push(...drawn.tasks);
    row = drawn.to;
    const counted = await informativeGroups(dir, input.overlong);
    informative += counted.informative;
    uniform += counted.uniform;
  }
  const summary: DynamicSamplingSummary = {
    rounds: rounds.length - 1,
    drawn: tasks.length - input.first.tasks.length,
    // with no informative group at all the step trains on everything, as without dynamic sampling
    dropped: informative > 0 ? uniform : 0,
    informative,
    rows: row - input.first.rows[0],
  };
  log.info(
    `step ${input.step}: dynamic sampling: ${plural(summary.rounds, 'extra round')} drew ${plural(summary.drawn, 'task')}; ${plural(summary.dropped, 'uniform group')} dropped; ${summary.informative} of ${quota} informative`,
  );
  return { rollouts, sampled: { inputs, tasks, dropUniform: informative > 0, summary } };
}
