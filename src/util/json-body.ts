/**
 * JSON.parse of a request body's bytes, with its long string literals remembered by their bytes. A
 * harness resends its whole conversation with every call, so most of a body is the same literals as the
 * call before (the system prompt, files read, tool output), and decoding and scanning them again was the
 * largest single cost of the proxy's call (about 0.7 M of its own 4.5 M instructions, 100 KB body). At each
 * opening quote, the scan of the body's structure looks the literal up by its first bytes and compares
 * the rest (memcmp): one of MIN_LITERAL bytes or more seen before is neither scanned nor decoded again,
 * and the body is parsed with a short placeholder in its place, then replaced by the remembered string.
 * A literal not seen before is parsed on its own and remembered. The value equals JSON.parse of the
 * text, key for key; a text that does not parse throws what JSON.parse throws for the whole text.
 */
import { randomBytes } from 'node:crypto';
import { MAX_JSON_DEPTH, scanJson } from './json-depth.ts';
import { internString } from './json-text.ts';
import { PrefixCache } from './prefix-cache.ts';

/** Literals shorter than this (in bytes, between the quotes) are parsed in place each time. */
const MIN_LITERAL = 1024;
/** Bytes and characters the remembered literals hold at most (least recently used go first). */
const MAX_REMEMBERED = 16 * 1024 * 1024;

/** A placeholder's text: a per-process random mark, which no request can name without knowing it. */
const MARK = `\u0000polar-literal-${randomBytes(12).toString('hex')}-`;
/** the placeholder's opening quote and escaped mark (its number and closing quote follow) */
const MARK_JSON = JSON.stringify(MARK).slice(0, -1);

interface Literal {
  bytes: Buffer;
  value: string;
}

/** The number a literal is filed under: its first 8 bytes (the caller checks there are that many). */
function prefixKey(bytes: Buffer, at: number): number {
  return bytes.readUInt32LE(at) * 0x200000 + (bytes.readUInt32LE(at + 4) & 0x1fffff);
}

/**
 * Literals by their first bytes, so that a scan finds one from its opening quote alone and steps over it
 * (src/util/prefix-cache.ts).
 */
class Literals {
  private readonly cache = new PrefixCache<number, Literal>(
    (literal) => prefixKey(literal.bytes, 0),
    (literal) => literal.bytes.length + literal.value.length,
    MAX_REMEMBERED,
  );

  /**
   * The literal whose content starts after the quote at `open` in `bytes` and is closed by a quote right
   * after it, or undefined. The content of a literal that once parsed cannot hold an unescaped quote or
   * end in an escape, so that quote is the one that closes the string.
   */
  at(bytes: Buffer, open: number): Literal | undefined {
    const start = open + 1;
    if (start + MIN_LITERAL >= bytes.length) return undefined;
    const same = this.cache.candidates(prefixKey(bytes, start));
    if (same === undefined) return undefined;
    for (const literal of same) {
      const close = start + literal.bytes.length;
      if (bytes[close] !== 0x22) continue;
      if (bytes.compare(literal.bytes, 0, literal.bytes.length, start, close) !== 0) continue;
      this.cache.touch(literal);
      return literal;
    }
    return undefined;
  }

  add(content: Buffer, value: string): void {
    if (content.length < MIN_LITERAL) return;
    // (a copy: a view would keep the whole request body alive)
    this.cache.add({ bytes: Buffer.from(content), value });
  }
}

const remembered = new Literals();

/**
 * A JSON body's value from its bytes, or `deep` when it nests deeper than MAX_JSON_DEPTH (then nothing
 * was parsed: walking such a value would overflow the stack). Throws JSON.parse's SyntaxError for a text
 * that is not JSON. Long strings in the value are the instances json-text's cache holds.
 */
export function parseJsonBody(bytes: Buffer): { value: unknown } | { deep: true } {
  const known = new Map<number, Literal>();
  const scan = scanJson(bytes, MAX_JSON_DEPTH, MIN_LITERAL, (open) => {
    const literal = remembered.at(bytes, open);
    if (literal === undefined) return -1;
    known.set(open, literal);
    return open + 1 + literal.bytes.length;
  });
  if (scan.deeper) return { deep: true };
  const literals = scan.literals;
  if (literals.length === 0) return { value: JSON.parse(bytes.toString('utf8')) };
  const values: string[] = [];
  let text = '';
  let at = 0;
  for (let k = 0; k < literals.length; k += 2) {
    const open = literals[k]!;
    const close = literals[k + 1]!;
    let value = known.get(open)?.value;
    if (value === undefined) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(bytes.toString('utf8', open, close + 1));
      } catch {
        // (left in the text: the whole text's parse reports it)
        continue;
      }
      value = internString(parsed as string);
      remembered.add(bytes.subarray(open + 1, close), value);
    }
    // (the quotes are ASCII: no character is cut between the pieces)
    text += `${bytes.toString('utf8', at, open)}${MARK_JSON}${values.length}"`;
    values.push(value);
    at = close + 1;
  }
  text += bytes.toString('utf8', at);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // the error, and its position, as JSON.parse gives them for the body as it came
    return { value: JSON.parse(bytes.toString('utf8')) };
  }
  return { value: place(value, values) };
}

/** The value with each placeholder replaced by its string (in place; the value itself when a placeholder). */
function place(value: unknown, values: string[]): unknown {
  if (typeof value === 'string') return placed(value, values);
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = place(value[i], values);
    return value;
  }
  const object = value as Record<string, unknown>;
  for (const key of Object.keys(object)) {
    const item = object[key];
    const next = place(item, values);
    if (next === item) continue;
    // (an own "__proto__" key from JSON.parse: an assignment would set the prototype instead)
    Object.defineProperty(object, key, { value: next, enumerable: true, writable: true, configurable: true });
  }
  return value;
}

function placed(text: string, values: string[]): string {
  if (!text.startsWith(MARK)) return text;
  const value = values[Number(text.slice(MARK.length))];
  if (value === undefined)
    throw new Error(`json-body: placeholder ${text.slice(MARK.length)} has no literal`);
  return value;
}
