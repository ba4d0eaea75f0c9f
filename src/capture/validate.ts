/**
 * Validation of one capture record (after a v2 record's deltas are rebuilt): zod, then the token arrays.
 * A call record is first given to a hand-written check (call-check.ts) that accepts a valid one without
 * zod; one it does not accept goes through zod, so the error (file:line, field, message) is zod's.
 */
import { InputError } from '../errors.ts';
import { firstIssue } from '../util/zod.ts';
import { checkCallShape } from './call-check.ts';
import { CAPTURE_VERSIONS, type CaptureRecord, captureRecordSchema, tokenConsistency } from './record.ts';

/** The schema check proper (zod, plus the token arrays' agreement). */
function validateShape(source: string, line: number, value: unknown): CaptureRecord {
  if (typeof value === 'object' && value !== null) {
    const v = (value as { v?: unknown }).v;
    if (typeof v === 'number' && !CAPTURE_VERSIONS.includes(v)) {
      throw new InputError(
        source,
        line,
        'v',
        `capture format version ${v} is not supported (this polar reads versions ${CAPTURE_VERSIONS.join(' and ')})`,
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

const HINT = 'see docs/capture-format.md for the record schema';

function checkIds(source: string, line: number, field: string, value: unknown[]): void {
  for (let i = 0; i < value.length; i++) {
    const x = value[i];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0) {
      throw new InputError(source, line, `${field}[${i}]`, 'expected a non-negative integer token id', HINT);
    }
  }
}

function checkNumbers(source: string, line: number, field: string, value: unknown[]): void {
  for (let i = 0; i < value.length; i++) {
    const x = value[i];
    if (typeof x !== 'number' || !Number.isFinite(x)) {
      throw new InputError(source, line, `${field}[${i}]`, 'expected a number', HINT);
    }
  }
}

/**
 * Validates one parsed JSON value as a capture record; throws InputError naming file:line and field.
 * Fast on big token arrays: a call record's shape is checked with its three token arrays set aside (zod
 * costs about 8x a JSON.parse on a 32k-id array), then a plain loop checks the arrays. The shape check is
 * call-check.ts's, falling back to zod (which names the field) for a record it does not accept.
 */
export function validateCaptureRecord(source: string, line: number, value: unknown): CaptureRecord {
  return validate(source, line, value, true);
}

/** validateCaptureRecord with zod alone (the reference the fast check is tested against). */
export function validateCaptureRecordWithZod(source: string, line: number, value: unknown): CaptureRecord {
  return validate(source, line, value, false);
}

function validate(source: string, line: number, value: unknown, fast: boolean): CaptureRecord {
  if (typeof value !== 'object' || value === null || (value as { type?: unknown }).type !== 'call') {
    return validateShape(source, line, value);
  }
  const v = value as Record<string, unknown>;
  const prompt = v.prompt_token_ids;
  const completion = v.completion_token_ids;
  const logprobs = v.completion_logprobs;
  const checked = fast ? checkCallShape(v) : null;
  // zod sees empty arrays in place of the big ones (type and nullability still checked by zod)
  const record =
    checked !== null && typeof checked !== 'string'
      ? checked
      : validateShape(source, line, {
          ...v,
          prompt_token_ids: Array.isArray(prompt) ? [] : prompt,
          completion_token_ids: Array.isArray(completion) ? [] : completion,
          completion_logprobs: Array.isArray(logprobs) ? [] : logprobs,
        });
  if (record.type !== 'call') return record;
  if (Array.isArray(prompt)) checkIds(source, line, 'prompt_token_ids', prompt);
  if (Array.isArray(completion)) checkIds(source, line, 'completion_token_ids', completion);
  if (Array.isArray(logprobs)) checkNumbers(source, line, 'completion_logprobs', logprobs);
  if (Array.isArray(completion) && Array.isArray(logprobs) && completion.length !== logprobs.length) {
    throw new InputError(
      source,
      line,
      'completion_logprobs',
      `completion_logprobs has ${logprobs.length} entries for ${completion.length} completion_token_ids`,
    );
  }
  record.prompt_token_ids = (prompt as number[] | null) ?? null;
  record.completion_token_ids = (completion as number[] | null) ?? null;
  record.completion_logprobs = (logprobs as number[] | null) ?? null;
  return record;
}
