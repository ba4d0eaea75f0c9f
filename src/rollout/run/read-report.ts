/**
 * A run folder's report.json read back by the cluster paths (a shard's report for --merge, the merged
 * report after the Slurm jobs, the report of a loop step's cluster rollouts): parsed and validated with
 * the report's own schema (src/rollout/run/report.ts `reportSchema`), a bad file an InputError naming the field.
 */
import { readFileSync } from 'node:fs';
import { InputError } from '../../errors.ts';
import { firstIssue } from '../../util/zod.ts';
import { type Report, reportSchema } from './report.ts';

export function readRunReport(path: string, hint?: string): Report {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new InputError(path, undefined, undefined, `not valid JSON (${(error as Error).message})`, hint);
  }
  const parsed = reportSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const { field, message } = firstIssue(parsed.error, '(file)');
  throw new InputError(
    path,
    undefined,
    field,
    message,
    hint ?? 'this report.json was not written by this polar: run the evaluation again',
  );
}
