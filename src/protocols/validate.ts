/**
 * Permissive request validation shared by the front-end wire APIs: a zod parse whose failure becomes a
 * ProtocolError naming the field (`input[3].call_id: expected string`). Parsing item by item with a
 * path prefix keeps messages precise where a union would only say "invalid input".
 */
import type { z } from 'zod';
import { describeIssue, issuePath } from '../util/zod.ts';
import { ProtocolError } from './errors.ts';

export function parseOrThrow<T extends z.ZodType>(
  schema: T,
  value: unknown,
  prefix: ReadonlyArray<PropertyKey> = [],
): z.output<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  if (!issue) throw new ProtocolError(`${issuePath(prefix)}: invalid value`);
  throw new ProtocolError(`${issuePath([...prefix, ...issue.path])}: ${describeIssue(issue)}`);
}
