/**
 * The --rewards file of `polar build`: JSONL, one object per line, either
 *   {"session": "<session id>", "reward": 1}
 * or
 *   {"task_id": "<task>", "sample": 3, "reward": 0}      (sample may be null or absent)
 * Unknown fields are kept and ignored. A later line for the same key wins. Small: held in memory.
 */
import { z } from 'zod';
import { InputError } from '../errors.ts';
import { parseJsonLine, readLines } from '../util/jsonl.ts';
import { firstIssue } from '../util/zod.ts';

const rewardLineSchema = z
  .looseObject({
    session: z.string().min(1).optional(),
    task_id: z.string().min(1).optional(),
    sample: z.number().int().nonnegative().nullable().optional(),
    reward: z.number(),
  })
  .refine((r) => r.session !== undefined || r.task_id !== undefined, {
    message: 'needs "session" or "task_id"',
    path: ['session'],
  });

export interface RewardTable {
  bySession: Map<string, number>;
  byTask: Map<string, number>;
}

export function taskKey(taskId: string, sample: number | null | undefined): string {
  return `${taskId}\u0000${sample ?? ''}`;
}

export async function readRewards(file: string): Promise<RewardTable> {
  const table: RewardTable = { bySession: new Map(), byTask: new Map() };
  for await (const line of readLines(file)) {
    const parsed = rewardLineSchema.safeParse(parseJsonLine(file, line));
    if (!parsed.success) {
      const { field, message } = firstIssue(parsed.error);
      throw new InputError(
        file,
        line.line,
        field,
        message,
        'each line of a rewards file is {"session", "reward"} or {"task_id", "sample", "reward"}',
      );
    }
    const r = parsed.data;
    if (r.session !== undefined) table.bySession.set(r.session, r.reward);
    else if (r.task_id !== undefined) table.byTask.set(taskKey(r.task_id, r.sample), r.reward);
  }
  return table;
}

/** The reward of a session from the table: by session id first, then by task and sample. */
export function lookupReward(
  table: RewardTable,
  session: string,
  taskId: string | null,
  sample: number | null,
): number | undefined {
  const bySession = table.bySession.get(session);
  if (bySession !== undefined) return bySession;
  if (taskId === null) return undefined;
  return table.byTask.get(taskKey(taskId, sample));
}

/**
 * Whether every reward of a group is the same: no learning signal, whatever the estimator (each of
 * polar train's advantages is 0 in such a group, and in a group of one).
 */
export function isUniform(rewards: readonly number[]): boolean {
  return rewards.every((r) => r === rewards[0]);
}
