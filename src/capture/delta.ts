/**
 * The delta encoding of capture format v2 (docs/capture-format.md): a JSON value told as what it shares
 * with the same field of an earlier call record, and what it adds. Two shapes:
 *   - an array: `{"keep": n, "add": [...]}` — the first n items of the base array, then `add`;
 *   - an object: its keys in order, each an op: `{"same": true}` (the base's value), `{"keep": n,
 *     "add": [...]}` (an array as above, against the base's value) or `{"set": value}` (literal).
 * Pure functions: encoding never mutates its inputs, decoding builds new arrays and objects (items that did
 * not change are shared with the base). Any key is data, `__proto__`, `constructor` and `toString`
 * included: values are read as own properties only and set as own properties (an assignment of
 * `__proto__` would set the prototype and drop the key), so a rebuilt object has the same keys as the
 * JSON it came from.
 */

export type ArrayDelta = { keep: number; add: unknown[] };
export type KeyOp = { same: true } | ArrayDelta | { set: unknown };
export type ObjectDelta = Record<string, KeyOp>;

type Json = Record<string, unknown>;

export function isPlainObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The object's own value at key (never one inherited from Object.prototype). */
function own(object: Json, key: string): unknown {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}

/** Sets an own, enumerable property, as JSON.parse does, whatever the key (`__proto__` too). */
function setOwn(object: Json, key: string, value: unknown): void {
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Deep equality of JSON values, key order included (so a rebuilt value serialises to the same bytes). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    // NaN never reaches JSON; numbers, strings and booleans compare by value above
    return false;
  }
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (let i = 0; i < ka.length; i++) {
    const k = ka[i]!;
    if (k !== kb[i]) return false;
    // (k is an own key of both: reading it never reaches a prototype)
    if (!jsonEqual((a as Json)[k], (b as Json)[k])) return false;
  }
  return true;
}

/** How many leading items of `value` equal those of `base` (JSON equality). */
export function commonPrefix(base: readonly unknown[], value: readonly unknown[]): number {
  const n = Math.min(base.length, value.length);
  let i = 0;
  while (i < n && jsonEqual(base[i], value[i])) i++;
  return i;
}

/** Common prefix of token ids against `first ++ second` (a call's prompt then its completion). */
export function commonIdPrefix(
  first: readonly number[],
  second: readonly number[],
  ids: readonly number[],
): number {
  const n1 = Math.min(first.length, ids.length);
  let i = 0;
  while (i < n1 && first[i] === ids[i]) i++;
  if (i < first.length) return i;
  const n2 = Math.min(first.length + second.length, ids.length);
  while (i < n2 && second[i - first.length] === ids[i]) i++;
  return i;
}

/**
 * An object's delta against a base object, or null when nothing is shared (then it is written whole).
 * Only top-level arrays are diffed: that is where a conversation grows (messages, input, tools).
 */
export function encodeObject(base: unknown, value: unknown): ObjectDelta | null {
  if (!isPlainObject(base) || !isPlainObject(value)) return null;
  const out: ObjectDelta = {};
  let shared = false;
  for (const key of Object.keys(value)) {
    const v = value[key];
    if (v === undefined) continue;
    const b = own(base, key);
    if (small(v)) {
      // a short literal is shorter than {"same":true}
      setOwn(out, key, { set: v });
    } else if (Object.hasOwn(base, key) && jsonEqual(b, v)) {
      setOwn(out, key, { same: true });
      shared = true;
    } else if (Array.isArray(v) && Array.isArray(b)) {
      const keep = commonPrefix(b, v);
      setOwn(out, key, keep > 0 ? { keep, add: v.slice(keep) } : { set: v });
      shared ||= keep > 0;
    } else {
      setOwn(out, key, { set: v });
    }
  }
  return shared ? out : null;
}

function small(value: unknown): boolean {
  if (typeof value === 'string') return value.length < 16;
  return typeof value !== 'object' || value === null;
}

/** Thrown by the decoders; the reader turns it into an InputError naming the field. */
export class DeltaError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

export function decodeArray(base: unknown, delta: unknown, field: string): unknown[] {
  if (!isPlainObject(delta) || !Array.isArray(delta.add) || !Number.isInteger(delta.keep)) {
    throw new DeltaError(field, 'expected {"keep": n, "add": [...]}');
  }
  const keep = delta.keep as number;
  if (!Array.isArray(base) || keep < 0 || keep > base.length) {
    throw new DeltaError(
      `${field}.keep`,
      `keeps ${keep} items of a base with ${Array.isArray(base) ? base.length : 'no'} items`,
    );
  }
  const out = base.slice(0, keep);
  for (const item of delta.add) out.push(item);
  return out;
}

/** Rebuilds an object from its base and its delta. */
export function decodeObject(base: unknown, delta: unknown, field: string): Json {
  if (!isPlainObject(delta)) throw new DeltaError(field, 'expected an object delta');
  const b = isPlainObject(base) ? base : undefined;
  const out: Json = {};
  for (const key of Object.keys(delta)) {
    const op = delta[key];
    const where = `${field}.${key}`;
    if (!isPlainObject(op)) throw new DeltaError(where, 'expected {"same"}, {"keep", "add"} or {"set"}');
    if (Object.hasOwn(op, 'set')) setOwn(out, key, op.set);
    else if (op.same === true) {
      if (b === undefined || !Object.hasOwn(b, key)) throw new DeltaError(where, 'the base has no such key');
      setOwn(out, key, b[key]);
    } else setOwn(out, key, decodeArray(b === undefined ? undefined : own(b, key), op, where));
  }
  return out;
}

/** Token ids `keep` of (prompt ++ completion), then `add`. */
export function decodeIds(
  prompt: readonly number[],
  completion: readonly number[] | null,
  delta: unknown,
  field: string,
): number[] {
  if (!isPlainObject(delta) || !Array.isArray(delta.add) || !Number.isInteger(delta.keep)) {
    throw new DeltaError(field, 'expected {"keep": n, "add": [...]}');
  }
  const keep = delta.keep as number;
  const second = completion ?? [];
  if (keep < 0 || keep > prompt.length + second.length) {
    throw new DeltaError(
      `${field}.keep`,
      `keeps ${keep} ids of a base with ${prompt.length + second.length} (prompt + completion)`,
    );
  }
  const add = delta.add as number[];
  // one concat makes the array at its final length (pushing onto a slice copied 30k ids twice: once to
  // slice, again when the first push outgrew it)
  if (keep <= prompt.length)
    return keep === prompt.length ? prompt.concat(add) : prompt.slice(0, keep).concat(add);
  return prompt.concat(second.slice(0, keep - prompt.length), add);
}
