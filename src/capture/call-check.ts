/**
 * A hand-written check of a call record's shape, for the hot path of `polar build` (zod costs about a
 * tenth of a build). It is not a second schema: callRecordSchema (record.ts) stays the definition, and
 * this check only answers "certainly valid" quickly. What it accepts it returns exactly as zod would
 * (the same fields, objects copied as zod copies them, the same key order); anything it does not accept
 * goes through zod, which names the field and the message (validate.ts). test/unit/capture/call-check.test.ts
 * runs both over valid records and over every field mutated, removed or mistyped, and asserts they agree
 * on accept/reject, on the field named, and on the record returned.
 *
 * Like validate.ts's light record, the three token arrays are only checked to be arrays (or null) here;
 * their elements are checked by validate.ts.
 */
import { CALL_APIS, type CallRecord, WEIGHT_VERSION_SOURCES } from './record.ts';

/** A check of one value: its output (as zod's would be), or FAIL with `failedAt` set to the field. */
type Check = (value: unknown, path: string) => unknown;

const FAIL: unique symbol = Symbol('fail');
let failedAt = '';

function fail(path: string): typeof FAIL {
  failedAt = path;
  return FAIL;
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** zod's isPlainObject (util.js), which z.record asks for. */
function isPlainObject(x: unknown): x is Record<string, unknown> {
  if (!isObject(x)) return false;
  const ctor = x.constructor;
  if (ctor === undefined) return true;
  const proto = (ctor as { prototype?: unknown }).prototype;
  return isObject(proto) && Object.hasOwn(proto, 'isPrototypeOf');
}

const isNumber = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);

const str: Check = (x, p) => (typeof x === 'string' ? x : fail(p));
const str1: Check = (x, p) => (typeof x === 'string' && x.length >= 1 ? x : fail(p));
const bool: Check = (x, p) => (typeof x === 'boolean' ? x : fail(p));
const num: Check = (x, p) => (isNumber(x) ? x : fail(p));
const int: Check = (x, p) => (Number.isSafeInteger(x) ? x : fail(p));
const nonNegInt: Check = (x, p) => (Number.isSafeInteger(x) && (x as number) >= 0 ? x : fail(p));
const unknown: Check = (x) => x;
const nullable =
  (check: Check): Check =>
  (x, p) =>
    x === null ? null : check(x, p);
const optional =
  (check: Check): Check =>
  (x, p) =>
    x === undefined ? undefined : check(x, p);
const oneOf = (values: readonly unknown[]): Check => {
  const set = new Set(values);
  return (x, p) => (set.has(x) ? x : fail(p));
};
/** the token arrays: their elements are validate.ts's to check */
const arrayOrNull: Check = (x, p) => (x === null || Array.isArray(x) ? x : fail(p));

const strings: Check = (x, p) => {
  if (!Array.isArray(x)) return fail(p);
  for (let i = 0; i < x.length; i++) if (typeof x[i] !== 'string') return fail(`${p}[${i}]`);
  return x.slice();
};

/** z.array(item).min(min): a new array of the items (each item's check output) */
const arrayOf =
  (item: Check, min = 0): Check =>
  (x, p) => {
    if (!Array.isArray(x)) return fail(p);
    const out: unknown[] = [];
    for (let i = 0; i < x.length; i++) {
      const v = item(x[i], `${p}[${i}]`);
      if (v === FAIL) return FAIL;
      out.push(v);
    }
    return out.length < min ? fail(p) : out;
  };

/** z.record(z.string(), value): a new object of the own keys ("__proto__" left out, as zod does). */
const record =
  (value: Check | null): Check =>
  (x, p) => {
    if (!isPlainObject(x)) return fail(p);
    const out: Record<string, unknown> = {};
    for (const key of Reflect.ownKeys(x)) {
      if (typeof key !== 'string') return fail(p);
      if (key === '__proto__') continue;
      const v = value === null ? x[key] : value(x[key], `${p}.${key}`);
      if (v === FAIL) return FAIL;
      out[key] = v;
    }
    return out;
  };

/** z.looseObject(shape): the shape's keys in order (an absent one left out), then the other keys. */
function looseObject(shape: Record<string, Check>): Check {
  const keys = Object.keys(shape);
  const checks = keys.map((k) => shape[k]!);
  const known = new Set(keys);
  return (x, p) => {
    if (!isObject(x)) return fail(p);
    const out: Record<string, unknown> = {};
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const v = checks[i]!(x[key], p === '' ? key : `${p}.${key}`);
      if (v === FAIL) return FAIL;
      if (v !== undefined || key in x) out[key] = v;
    }
    for (const key of Object.keys(x)) if (!known.has(key)) out[key] = x[key];
    return out;
  };
}

/** The call record's fields, in callRecordSchema's order (the test holds the two key lists equal). */
export const CALL_FIELDS: Record<string, Check> = {
  v: oneOf([1, 2, 3]),
  type: oneOf(['call']),
  id: str1,
  session: str1,
  seq: nonNegInt,
  api: oneOf(CALL_APIS),
  harness: str,
  stream: bool,
  started_at: str1,
  ended_at: str1,
  timings: looseObject({ ttfb_ms: nullable(num), backend_ms: nullable(num), total_ms: num }),
  request: looseObject({ method: str, path: str, headers: record(str), body: unknown }),
  response: looseObject({ status: int, body: unknown }),
  canonical_request: unknown,
  canonical_response: unknown,
  backend_request: nullable(looseObject({ url: str, body: unknown })),
  prompt_token_ids: arrayOrNull,
  completion_token_ids: arrayOrNull,
  completion_logprobs: arrayOrNull,
  finish_reason: nullable(str),
  usage: nullable(looseObject({ prompt_tokens: num, completion_tokens: num })),
  token_exact: bool,
  warnings: strings,
  harness_meta: record(null),
  backend_info: optional(record(null)),
  error: nullable(looseObject({ kind: str, message: str, status: int })),
  tool_call_unparsed: optional(bool),
  policy_version: optional(nonNegInt),
  weight_versions: optional(
    looseObject({
      source: oneOf(WEIGHT_VERSION_SOURCES),
      versions: arrayOf(str1, 1),
      spans: optional(arrayOf(looseObject({ version: str1, start: nonNegInt, end: nonNegInt }))),
    }),
  ),
};

const checkCall = looseObject(CALL_FIELDS);

/**
 * The call record as zod outputs it, or (a string) the field zod names first. Also refused: a
 * token-exact call without ids (record.ts tokenConsistency; named `completion_logprobs`, as validate.ts
 * names it).
 */
export function checkCallShape(value: unknown): CallRecord | string {
  const out = checkCall(value, '');
  if (out === FAIL) return failedAt || '(record)';
  const r = out as CallRecord;
  if (r.token_exact && (r.prompt_token_ids === null || r.completion_token_ids === null) && r.error === null)
    return 'completion_logprobs';
  return r;
}
