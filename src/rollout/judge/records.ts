/**
 * judge.jsonl (JUDGE_FILE in a run folder: polar eval's --out, each loop step's rollouts/, each gym
 * rollout's folder): one record per judge question, version 1, documented in docs/judge.md. It is the
 * record of what the judge was asked and answered, apart from the agent's captures (its records are not
 * capture records, so `polar build DIR` skips the file), and the cache a rerun reads: an `ok` record's
 * scores answer the same question (same content hash) again without a call.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { InputError } from '../../errors.ts';
import { parseJsonLine, readLines, TruncatedLine } from '../../util/jsonl.ts';
import { appendPrivate } from '../../util/private-files.ts';
import { firstIssue } from '../../util/zod.ts';
import { JUDGE_MODES } from './types.ts';

/** the judge's records in a run folder */
export const JUDGE_FILE = 'judge.jsonl';

const attemptSchema = z.looseObject({
  /** the HTTP status (null: no answer) */
  status: z.number().int().nullable(),
  /** the answer's content (null: none) */
  content: z.string().nullable(),
  /** why the attempt gave no verdict (null: it did) */
  problem: z.string().nullable(),
});

export const judgeRecordSchema = z.looseObject({
  v: z.literal(1),
  type: z.literal('judge_call'),
  /** sha256 of rubric, model, mode and every sample's task, transcript and patch */
  key: z.string().regex(/^[0-9a-f]{64}$/),
  mode: z.enum(JUDGE_MODES),
  model: z.string(),
  /** the chat completions URL, credentials redacted */
  url: z.string(),
  rubric_file: z.string(),
  /** the samples judged (<instance>__s<j>), in the order the scores follow */
  samples: z.array(z.string()).min(1),
  /** the first attempt's messages */
  messages: z.array(z.looseObject({ role: z.string(), content: z.string() })),
  attempts: z.array(attemptSchema),
  status: z.enum(['ok', 'error']),
  scores: z
    .array(z.looseObject({ key: z.string(), score: z.number().min(0).max(1), reason: z.string() }))
    .nullable(),
  error: z.string().nullable(),
  at: z.string(),
});
export type JudgeRecord = z.infer<typeof judgeRecordSchema>;
export type JudgeAttempt = z.infer<typeof attemptSchema>;

const HINT = `${JUDGE_FILE} is written by polar's judge (docs/judge.md); move it aside to ask the judge again`;

export class JudgeRecords {
  private chain: Promise<void> = Promise.resolve();

  private constructor(
    readonly file: string,
    private readonly byKey: Map<string, Array<{ score: number; reason: string }>>,
  ) {}

  /** Reads the folder's judge.jsonl (validated; a line cut by a crash is ignored). */
  static async open(dir: string): Promise<JudgeRecords> {
    const file = join(dir, JUDGE_FILE);
    const byKey = new Map<string, Array<{ score: number; reason: string }>>();
    if (existsSync(file)) {
      for await (const line of readLines(file)) {
        let value: unknown;
        try {
          value = parseJsonLine(file, line, HINT);
        } catch (error) {
          if (error instanceof TruncatedLine) continue;
          throw error;
        }
        const parsed = judgeRecordSchema.safeParse(value);
        if (!parsed.success) {
          const { field, message } = firstIssue(parsed.error);
          throw new InputError(file, line.line, field, message, HINT);
        }
        const r = parsed.data;
        if (r.status === 'ok' && r.scores && r.scores.length === r.samples.length)
          byKey.set(
            r.key,
            r.scores.map(({ score, reason }) => ({ score, reason })),
          );
      }
    }
    return new JudgeRecords(file, byKey);
  }

  /** The verdicts kept for `key`, when they are for `n` samples. */
  cached(key: string, n: number): Array<{ score: number; reason: string }> | null {
    const found = this.byKey.get(key);
    return found && found.length === n ? found : null;
  }

  /** Appends one record, one complete line at a time (calls in flight are written in turn). */
  async append(record: JudgeRecord): Promise<void> {
    if (record.status === 'ok' && record.scores)
      this.byKey.set(
        record.key,
        record.scores.map(({ score, reason }) => ({ score, reason })),
      );
    this.chain = this.chain.then(() => appendPrivate(this.file, `${JSON.stringify(record)}\n`));
    await this.chain;
  }
}
