/**
 * The schedule journal of `polar loop --max-staleness K` (run/schedule.jsonl, LOOP_FILES.schedule): one
 * JSON record a line, appended and flushed before the decision it records takes effect, replayed by
 * --resume (src/loop/async.ts). Documented in docs/loop.md, "Rollouts while training".
 */
import { open, readFile } from 'node:fs/promises';
import { z } from 'zod';
import { PolarError } from '../errors.ts';
import { firstIssue } from '../util/zod.ts';

/** The journal's record version (docs/loop.md, "The schedule journal"). */
export const SCHEDULE_VERSION = 1;

/**
 * Why a group was dropped: complete but too stale, cancelled as overdue (--overdue drop), or holding samples
 * of a version --resume rolled back. Its task is launched again. A `dropped` record without one was written
 * before reasons were (a journal of an earlier polar): its task is not relaunched on --resume.
 */
export const DROP_REASONS = ['stale', 'overdue', 'rolled_back'] as const;
export type DropReason = (typeof DROP_REASONS)[number];

const int = z.number().int().nonnegative();
export const scheduleRecordSchema = z.discriminatedUnion('type', [
  /** a group launched: its task, the step it was meant for, and (--overdue drop) the dropped group it replaces */
  z.object({
    v: z.literal(1),
    type: z.literal('group'),
    group: int,
    task: z.string(),
    meant_for: int,
    replaces: int.optional(),
  }),
  /** one of its samples got a rollout slot under this policy version (the last such record wins) */
  z.object({ v: z.literal(1), type: z.literal('sample'), group: int, sample: int, policy_version: int }),
  /** every sample of the group is in */
  z.object({ v: z.literal(1), type: z.literal('complete'), group: int }),
  /**
   * a group never trained, dropped at `step`: complete but too stale (reason absent, or `stale` under
   * --overdue drop), or still running when `step` trained without it and no later step may (`overdue`,
   * --overdue drop: its running samples are cancelled). Under --overdue drop its task is launched again.
   */
  z.object({
    v: z.literal(1),
    type: z.literal('dropped'),
    group: int,
    step: int,
    reason: z.enum(DROP_REASONS).optional(),
  }),
  /** the groups `step` trains, written before it trains */
  z.object({ v: z.literal(1), type: z.literal('batch'), step: int, groups: z.array(int) }),
]);
export type ScheduleRecord = z.infer<typeof scheduleRecordSchema>;

/** An append-only journal, each record flushed to disk before the decision it records takes effect. */
export interface Journal {
  append(record: ScheduleRecord): Promise<void>;
}

/** The journal in a file: one JSON line per record, fsynced per record, written one at a time. */
export function fileJournal(path: string): Journal {
  let chain = Promise.resolve();
  return {
    append(record) {
      const line = `${JSON.stringify(record)}\n`;
      chain = chain.then(async () => {
        const f = await open(path, 'a', 0o600);
        try {
          await f.write(line);
          await f.datasync();
        } finally {
          await f.close();
        }
      });
      return chain;
    },
  };
}

/** A journal's records; a last line cut by a crash is ignored (it was never acted on), any other bad line is an error. */
export async function readJournal(path: string): Promise<ScheduleRecord[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return [];
  }
  const lines = text.split('\n');
  const out: ScheduleRecord[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '') continue;
    const last = i === lines.length - 1; // no newline after it: cut while written
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      if (last) break;
      throw new PolarError(`${path}:${i + 1}: not JSON`, {
        hint: 'the schedule journal was changed by hand: move the run aside or start another --out',
      });
    }
    const parsed = scheduleRecordSchema.safeParse(value);
    if (!parsed.success) {
      const { field, message } = firstIssue(parsed.error, '(record)');
      throw new PolarError(`${path}:${i + 1}: ${field}: ${message}`, {
        hint: 'this schedule journal was not written by this polar: move the run aside or start another --out',
      });
    }
    out.push(parsed.data);
  }
  return out;
}
