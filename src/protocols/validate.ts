/**
 * Permissive request validation shared by the front-end wire APIs: a zod parse whose failure becomes a
 * ProtocolError naming the field (`input[3].call_id: expected string`). Parsing item by item with a
 * path prefix keeps messages precise where a union would only say "invalid input".
 */
import type { z } from 'zod';
import { issuePath, ProtocolError } from './errors.ts';

type Issue = z.core.$ZodIssue;

function describe(issue: Issue): string {
  switch (issue.code) {
    case 'invalid_type':
      return `expected ${issue.expected}`;
    case 'invalid_value':
      return `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    default:
      return issue.message;
  }
}

export function parseOrThrow<T extends z.ZodType>(
  schema: T,
  value: unknown,
  prefix: ReadonlyArray<PropertyKey> = [],
): z.output<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  if (!issue) throw new ProtocolError(`${issuePath(prefix)}: invalid value`);
  throw new ProtocolError(`${issuePath([...prefix, ...issue.path])}: ${describe(issue)}`);
}
