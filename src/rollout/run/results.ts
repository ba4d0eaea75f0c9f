/**
 * results.jsonl (EVAL_FILES.results): one graded result per (instance, sample), one complete line at a
 * time, read back by --resume, --regrade and a cluster's merge.
 */
import { existsSync } from 'node:fs';
import { InputError } from '../../errors.ts';
import { parseJsonLine, readLines, TruncatedLine } from '../../util/jsonl.ts';
import { firstIssue } from '../../util/zod.ts';
import { type ResultLine, resultLineSchema } from './report.ts';

export function sampleKey(instanceId: string, sample: number): string {
  return `${instanceId}__s${sample}`;
}

/**
 * Reads results.jsonl (resultLineSchema); keeps the latest line per sample. A last line cut by a crash is
 * ignored (its sample runs again on --resume); any other line that is not a result is bad input.
 */
export async function readResults(path: string): Promise<Map<string, ResultLine>> {
  const map = new Map<string, ResultLine>();
  if (!existsSync(path)) return map;
  for await (const line of readLines(path)) {
    let value: unknown;
    try {
      value = parseJsonLine(path, line, RESULTS_HINT);
    } catch (error) {
      if (error instanceof TruncatedLine) continue;
      throw error;
    }
    const parsed = resultLineSchema.safeParse(value);
    if (!parsed.success) {
      const { field, message } = firstIssue(parsed.error);
      throw new InputError(path, line.line, field, message, RESULTS_HINT);
    }
    // the line as written (key order kept when --resume writes it again)
    map.set(sampleKey(parsed.data.instance_id, parsed.data.sample), value as ResultLine);
  }
  return map;
}

const RESULTS_HINT = 'results.jsonl is written by polar eval, one result per line (docs/eval.md)';
