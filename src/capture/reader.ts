import type { Readable } from 'node:stream';
import type { z } from 'zod';
import { InputError } from '../errors.ts';
import { parseJsonLine, readLines } from '../util/jsonl.ts';
import { CAPTURE_VERSION, type CaptureRecord, captureRecordSchema, tokenConsistency } from './record.ts';

export interface ReadOptions {
  /** skip invalid lines (reporting each through onInvalid) instead of failing */
  skipInvalid?: boolean;
  onInvalid?: (error: InputError) => void;
  stdin?: Readable;
}

export interface LocatedRecord {
  record: CaptureRecord;
  source: string;
  line: number;
}

/** The first failing field of a zod error, as a dotted path. */
export function firstIssue(error: z.ZodError): { field: string; message: string } {
  const issue = error.issues[0];
  if (!issue) return { field: '', message: 'invalid' };
  return { field: issue.path.map(String).join('.') || '(record)', message: issue.message };
}

/** Validates one parsed JSON value as a capture record; throws InputError naming file:line and field. */
export function validateCaptureRecord(source: string, line: number, value: unknown): CaptureRecord {
  if (typeof value === 'object' && value !== null) {
    const v = (value as { v?: unknown }).v;
    if (typeof v === 'number' && v !== CAPTURE_VERSION) {
      throw new InputError(
        source,
        line,
        'v',
        `capture format version ${v} is not supported (this polar reads version ${CAPTURE_VERSION})`,
        'upgrade polar, or re-capture with this version',
      );
    }
  }
  const parsed = captureRecordSchema.safeParse(value);
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error);
    throw new InputError(source, line, field, message, 'see docs/capture-format.md for the record schema');
  }
  if (parsed.data.type === 'call') {
    const problem = tokenConsistency(parsed.data);
    if (problem) throw new InputError(source, line, 'completion_logprobs', problem);
  }
  return parsed.data;
}

/** Streams validated capture records from a file or `-` (stdin). */
export async function* readCapture(source: string, options: ReadOptions = {}): AsyncGenerator<LocatedRecord> {
  for await (const line of readLines(source, options.stdin)) {
    try {
      const value = parseJsonLine(source, line);
      yield { record: validateCaptureRecord(source, line.line, value), source, line: line.line };
    } catch (error) {
      if (options.skipInvalid && error instanceof InputError) {
        options.onInvalid?.(error);
        continue;
      }
      throw error;
    }
  }
}
