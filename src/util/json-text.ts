/**
 * JSON.stringify, byte for byte, with the JSON text of long strings remembered. A harness resends the
 * whole conversation with every call, and the proxy serialises each call's prompt text more than once
 * (the backend request, the capture record's canonical request): escaping a long string costs about
 * 3.5 ns a character in JSON.stringify, a lookup of one already seen costs a comparison (V8 hashes a
 * string over 16383 characters by its length alone). The rest of the value is written by
 * JSON.stringify itself: a part with no long string in it at once, the parts around long strings piece
 * by piece; the pieces are joined as ropes, flattened once by the writer.
 */

/** Strings shorter than this are escaped by JSON.stringify each time (a lookup would cost as much). */
const LONG = 1024;
/** Below this depth the value is written here; deeper, JSON.stringify writes the rest (and reports cycles). */
const MAX_DEPTH = 64;

/** A long string's JSON text, and its UTF-8 bytes once a writer asked for them. */
interface Entry {
  /** the string itself, as first seen (the one instance interning hands out) */
  key: string;
  text: string;
  bytes: Buffer | null;
}

/**
 * The JSON text of long strings, least recently used first; bounded by the characters and bytes it
 * holds (keys, texts, bytes), so it keeps a few conversations' worth of text, not the process's memory.
 */
class TextCache {
  private readonly map = new Map<string, Entry>();
  private size = 0;
  /** the entry at the end of the order (a hit on it needs no move) */
  private newest: Entry | undefined;

  constructor(private readonly maxSize: number) {}

  entry(value: string): Entry {
    const hit = this.map.get(value);
    if (hit !== undefined) {
      // most recently used: to the end of the order (each map operation compares the long key again)
      if (hit !== this.newest) {
        this.map.delete(value);
        this.map.set(value, hit);
        this.newest = hit;
      }
      return hit;
    }
    const entry: Entry = { key: value, text: JSON.stringify(value), bytes: null };
    const size = value.length + entry.text.length;
    if (size > this.maxSize) return entry;
    this.map.set(value, entry);
    this.newest = entry;
    this.add(size);
    return entry;
  }

  /** the entry's bytes (made once, counted against the bound) */
  bytes(entry: Entry): Buffer {
    if (entry.bytes === null) {
      entry.bytes = Buffer.from(entry.text, 'utf8');
      this.add(entry.bytes.length);
    }
    return entry.bytes;
  }

  private add(size: number): void {
    this.size += size;
    for (const [k, v] of this.map) {
      if (this.size <= this.maxSize) break;
      this.map.delete(k);
      if (v === this.newest) this.newest = undefined;
      this.size -= k.length + v.text.length + (v.bytes?.length ?? 0);
    }
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

/** Nodes a hasLong walk visits at most; past that the value is written piece by piece, as before. */
const WALK_BUDGET = 4096;

/**
 * Whether writing `value` here could use a remembered long string: a string of LONG characters or more
 * where value() would look it up (not inside what value() hands to JSON.stringify whole: a number array,
 * a non-plain object, a value below MAX_DEPTH). Stops at the first one. A walk over its budget (a large
 * or cyclic value) answers true, so the value is written by value() as before and JSON.stringify still
 * reports a cycle.
 */
function hasLong(value: unknown, depth: number, budget: { left: number }): boolean {
  if (typeof value === 'string') return value.length >= LONG;
  if (typeof value !== 'object' || value === null || depth >= MAX_DEPTH) return false;
  if (--budget.left < 0) return true;
  if (Array.isArray(value)) {
    if (value.length === 0 || typeof value[0] === 'number') return false;
    for (let i = 0; i < value.length; i++) if (hasLong(value[i], depth + 1, budget)) return true;
    return false;
  }
  if (!isPlain(value) || typeof (value as { toJSON?: unknown }).toJSON === 'function') return false;
  for (const key of Object.keys(value)) {
    if (hasLong((value as Record<string, unknown>)[key], depth + 1, budget)) return true;
  }
  return false;
}

/** Writes one value's text: into one string, or (with pieces) as buffers, long strings' cached bytes among them. */
class Writer {
  out = '';

  constructor(private readonly pieces: Buffer[] | null) {}

  /** the text written since the last piece, as a piece */
  cut(): void {
    if (this.pieces === null || this.out === '') return;
    this.pieces.push(Buffer.from(this.out, 'utf8'));
    this.out = '';
  }

  value(value: unknown, depth: number): void {
    if (typeof value === 'string') {
      if (value.length < LONG) this.out += JSON.stringify(value);
      else if (this.pieces === null) this.out += cache.entry(value).text;
      else {
        this.cut();
        this.pieces.push(cache.bytes(cache.entry(value)));
      }
      return;
    }
    if (
      typeof value !== 'object' ||
      value === null ||
      depth >= MAX_DEPTH ||
      // (no long string in it: JSON.stringify writes the whole of it at once, natively)
      !hasLong(value, depth, { left: WALK_BUDGET })
    ) {
      this.out += JSON.stringify(value) as string;
      return;
    }
    if (Array.isArray(value)) {
      // (a token-id array and the like: all of it at once, natively)
      if (value.length === 0 || typeof value[0] === 'number') {
        this.out += JSON.stringify(value);
        return;
      }
      this.out += '[';
      for (let i = 0; i < value.length; i++) {
        if (i > 0) this.out += ',';
        const item: unknown = value[i];
        if (skipped(item)) this.out += 'null';
        else this.value(item, depth + 1);
      }
      this.out += ']';
      return;
    }
    // a toJSON (Date), a class instance, a boxed primitive: JSON.stringify's own rules, for the whole of it
    if (!isPlain(value) || typeof (value as { toJSON?: unknown }).toJSON === 'function') {
      this.out += JSON.stringify(value) as string;
      return;
    }
    this.out += '{';
    let first = true;
    for (const key of Object.keys(value)) {
      const item = (value as Record<string, unknown>)[key];
      if (skipped(item)) continue;
      this.out += `${first ? '' : ','}${JSON.stringify(key)}:`;
      first = false;
      this.value(item, depth + 1);
    }
    this.out += '}';
  }
}

/**
 * The text JSON.stringify(value) gives (no replacer, no indentation), for a value that is not undefined,
 * a function or a symbol at the top. Throws what JSON.stringify throws (a cycle, a BigInt).
 */
export function stringifyJson(value: unknown): string {
  const writer = new Writer(null);
  writer.value(value, 0);
  return writer.out;
}

/**
 * The same text as UTF-8 buffers to write one after the other (a request body): a long string seen
 * before is its cached bytes, neither escaped nor encoded again.
 */
export function stringifyJsonPieces(value: unknown): Buffer[] {
  const pieces: Buffer[] = [];
  const writer = new Writer(pieces);
  writer.value(value, 0);
  writer.cut();
  return pieces;
}

/**
 * The cache's instance of a long string (remembered when new), or the string itself when short. A request
 * body's long strings are replaced by it (src/util/json-body.ts): the copy a parse made dies at once
 * instead of surviving young collections while its call is in flight, and the lookups that serialise it
 * again (the backend request, the record) find the instance itself.
 */
export function internString(text: string): string {
  return text.length < LONG ? text : cache.entry(text).key;
}
