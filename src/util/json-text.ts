/**
 * JSON.stringify, byte for byte, with the JSON text of long strings remembered. A harness resends the
 * whole conversation with every call, and the proxy serialises each call's prompt text more than once
 * (the backend request, the capture record's canonical request): escaping a long string costs about
 * 3.5 ns a character in JSON.stringify, a lookup of one already seen costs a comparison (V8 hashes a
 * string over 16383 characters by its length alone). The rest of the value is written by
 * JSON.stringify itself, piece by piece; the pieces are joined as ropes, flattened once by the writer.
 */

/** Strings shorter than this are escaped by JSON.stringify each time (a lookup would cost as much). */
const LONG = 1024;
/** Below this depth the value is written here; deeper, JSON.stringify writes the rest (and reports cycles). */
const MAX_DEPTH = 64;

/**
 * The JSON text of long strings, least recently used first; bounded by the characters it holds (keys and
 * texts), so it keeps a few conversations' worth of text, not the process's memory.
 */
class TextCache {
  private readonly map = new Map<string, string>();
  private chars = 0;

  constructor(private readonly maxChars: number) {}

  text(value: string): string {
    const hit = this.map.get(value);
    if (hit !== undefined) {
      // most recently used: to the end of the order
      this.map.delete(value);
      this.map.set(value, hit);
      return hit;
    }
    const text = JSON.stringify(value);
    const size = value.length + text.length;
    if (size > this.maxChars) return text;
    this.map.set(value, text);
    this.chars += size;
    for (const [k, v] of this.map) {
      if (this.chars <= this.maxChars) break;
      this.map.delete(k);
      this.chars -= k.length + v.length;
    }
    return text;
  }
}

const cache = new TextCache(8 * 1024 * 1024);

function isPlain(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** A value JSON.stringify leaves out of an object (and writes as null in an array). */
function skipped(value: unknown): boolean {
  return value === undefined || typeof value === 'function' || typeof value === 'symbol';
}

function write(value: unknown, depth: number): string {
  if (typeof value === 'string') return value.length < LONG ? JSON.stringify(value) : cache.text(value);
  if (typeof value !== 'object' || value === null || depth >= MAX_DEPTH) {
    return JSON.stringify(value) as string;
  }
  if (Array.isArray(value)) {
    // (a token-id array and the like: all of it at once, natively)
    if (value.length === 0 || typeof value[0] === 'number') return JSON.stringify(value);
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ',';
      const item: unknown = value[i];
      out += skipped(item) ? 'null' : write(item, depth + 1);
    }
    return `${out}]`;
  }
  // a toJSON (Date), a class instance, a boxed primitive: JSON.stringify's own rules, for the whole of it
  if (!isPlain(value) || typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return JSON.stringify(value) as string;
  }
  let out = '{';
  let first = true;
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key];
    if (skipped(item)) continue;
    out += `${first ? '' : ','}${JSON.stringify(key)}:${write(item, depth + 1)}`;
    first = false;
  }
  return `${out}}`;
}

/**
 * The text JSON.stringify(value) gives (no replacer, no indentation), for a value that is not undefined,
 * a function or a symbol at the top. Throws what JSON.stringify throws (a cycle, a BigInt).
 */
export function stringifyJson(value: unknown): string {
  return write(value, 0);
}
