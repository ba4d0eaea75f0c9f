/**
 * Validation of capture lines for `polar build`, with the same rules and messages as
 * src/capture/reader.ts but fast on big token arrays: zod checks a call record with its three token
 * arrays set aside (zod costs ~8x a JSON.parse on a 32k-id array), then a plain loop checks the arrays.
 */
import { validateCaptureRecord } from '../capture/reader.ts';
import type { CaptureRecord } from '../capture/record.ts';
import { InputError } from '../errors.ts';

const HINT = 'see docs/capture-format.md for the record schema';

function checkIds(source: string, line: number, field: string, value: unknown[]): void {
  for (let i = 0; i < value.length; i++) {
    const x = value[i];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0) {
      throw new InputError(source, line, `${field}.${i}`, 'expected a non-negative integer token id', HINT);
    }
  }
}

function checkNumbers(source: string, line: number, field: string, value: unknown[]): void {
  for (let i = 0; i < value.length; i++) {
    const x = value[i];
    if (typeof x !== 'number' || !Number.isFinite(x)) {
      throw new InputError(source, line, `${field}.${i}`, 'expected a number', HINT);
    }
  }
}

/** Validates one parsed JSON value as a capture record; throws InputError naming file:line and field. */
export function validateCaptureValue(source: string, line: number, value: unknown): CaptureRecord {
  if (typeof value !== 'object' || value === null || (value as { type?: unknown }).type !== 'call') {
    return validateCaptureRecord(source, line, value);
  }
  const v = value as Record<string, unknown>;
  const prompt = v.prompt_token_ids;
  const completion = v.completion_token_ids;
  const logprobs = v.completion_logprobs;
  // zod sees empty arrays in place of the big ones (type and nullability still checked by zod)
  const light = {
    ...v,
    prompt_token_ids: Array.isArray(prompt) ? [] : prompt,
    completion_token_ids: Array.isArray(completion) ? [] : completion,
    completion_logprobs: Array.isArray(logprobs) ? [] : logprobs,
  };
  const record = validateCaptureRecord(source, line, light);
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
