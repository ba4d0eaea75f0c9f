/**
 * zod, the one way: where an issue is (`input[3].call_id`), what it says (`expected string`), and a
 * reader's tolerant view of a writer's schema. Every message that names a field of a parsed value uses
 * issuePath, so a request body, a capture record and a run folder's files all name fields alike.
 */
import { z } from 'zod';

type Issue = z.core.$ZodIssue;

/** A zod issue path as one string: `input[3].call_id`; `whole` for the value itself (an empty path). */
export function issuePath(path: ReadonlyArray<PropertyKey>, whole = '(body)'): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out ? `.${String(key)}` : String(key);
  }
  return out || whole;
}

/** What an issue says, short: `expected string`, `expected one of "a", "b"`, else zod's message. */
export function describeIssue(issue: Issue): string {
  switch (issue.code) {
    case 'invalid_type':
      return `expected ${issue.expected}`;
    case 'invalid_value':
      return `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    default:
      return issue.message;
  }
}

/** The first issue of a failed parse: its field (issuePath) and zod's message. */
export function firstIssue(error: z.ZodError, whole = '(record)'): { field: string; message: string } {
  const issue = error.issues[0];
  if (!issue) return { field: whole, message: 'invalid' };
  return { field: issuePath(issue.path, whole), message: issue.message };
}

/** Every field optional, at any depth: what a reader of an older or half-known file can count on. */
export type Lenient<T> =
  T extends ReadonlyArray<infer E>
    ? Array<Lenient<E>>
    : T extends object
      ? { [K in keyof T]?: Lenient<T[K]> }
      : T;

const views = new WeakMap<z.ZodType, z.ZodType>();

/** A writer's schema with every object field optional and every record partial, at any depth. */
function lenientView(schema: z.ZodType): z.ZodType {
  const known = views.get(schema);
  if (known) return known;
  let view: z.ZodType = schema;
  if (schema instanceof z.ZodObject) {
    const shape = schema.shape as Record<string, z.ZodType>;
    view = z.looseObject(
      Object.fromEntries(Object.entries(shape).map(([k, s]) => [k, lenientView(s).optional()])),
    );
  } else if (schema instanceof z.ZodRecord) {
    view = z.partialRecord(
      schema.keyType as z.core.$ZodRecordKey,
      lenientView(schema.valueType as z.ZodType),
    );
  } else if (schema instanceof z.ZodArray) {
    view = z.array(lenientView(schema.element as z.ZodType));
  } else if (schema instanceof z.ZodNullable) {
    view = lenientView(schema.unwrap() as z.ZodType).nullable();
  } else if (schema instanceof z.ZodOptional) {
    view = lenientView(schema.unwrap() as z.ZodType).optional();
  }
  views.set(schema, view);
  return view;
}

function dropAt(value: unknown, path: ReadonlyArray<PropertyKey>): boolean {
  let parent: unknown = value;
  for (const key of path.slice(0, -1)) {
    if (typeof parent !== 'object' || parent === null) return false;
    parent = (parent as Record<PropertyKey, unknown>)[key];
  }
  const last = path.at(-1);
  if (last === undefined || typeof parent !== 'object' || parent === null || !(last in parent)) return false;
  if (Array.isArray(parent) && typeof last === 'number') parent.splice(last, 1);
  else delete (parent as Record<PropertyKey, unknown>)[last];
  return true;
}

/**
 * Reads a value written under `schema` as a reader that must show what it can: fields may be missing (an
 * older writer, a step still running), and a field of the wrong type is dropped and named in `problems`
 * (`pass_at_1.mean: expected number`). null (with a problem) when the value itself is not of the schema's
 * kind (an array for an object).
 */
export function readLenient<T extends z.ZodType>(
  schema: T,
  value: unknown,
): { data: Lenient<z.output<T>> | null; problems: string[] } {
  const view = lenientView(schema);
  const problems: string[] = [];
  const current: unknown = structuredClone(value);
  // each round drops at least one bad value, so this ends; the bound only guards against a zod surprise
  for (let round = 0; round < 1000; round++) {
    const parsed = view.safeParse(current);
    if (parsed.success) return { data: parsed.data as Lenient<z.output<T>>, problems };
    let dropped = false;
    // deepest paths first, so that dropping an array item does not shift the index of another issue
    const issues = [...parsed.error.issues].sort((a, b) => b.path.length - a.path.length);
    for (const issue of issues) {
      if (dropAt(current, issue.path)) {
        problems.push(`${issuePath(issue.path)}: ${describeIssue(issue)}`);
        dropped = true;
        break;
      }
    }
    if (!dropped) {
      const issue = parsed.error.issues[0];
      problems.push(`${issuePath(issue?.path ?? [], '(file)')}: ${issue ? describeIssue(issue) : 'invalid'}`);
      return { data: null, problems };
    }
  }
  return { data: null, problems };
}
