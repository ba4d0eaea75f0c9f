/**
 * How deeply a JSON text nests, measured on its bytes without parsing (no recursion, stops early).
 * Parsing a deep text is fine; walking the parsed value recursively (serialising a record, converting a
 * request, redacting) overflows the stack, so polar refuses such bodies before anything walks them.
 */

/** Nesting polar accepts in a request body: far above any real harness request (tool schemas nest ~20). */
export const MAX_JSON_DEPTH = 256;

/** Why a request body is refused for its nesting (checked before anything parses or walks it), or null. */
export function depthProblem(bytes: Uint8Array): string | null {
  return nestsDeeperThan(bytes, MAX_JSON_DEPTH) ? depthProblemMessage() : null;
}

export function depthProblemMessage(): string {
  return `request body nests deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`;
}

/**
 * true when the JSON text nests objects/arrays deeper than max (strings are skipped, escapes honoured).
 * A long string is skipped with the native indexOf to its closing quote (most of a request body is
 * string content: prompts, tool output), so the scan steps byte by byte mostly through the structure.
 */
export function nestsDeeperThan(bytes: Uint8Array, max: number): boolean {
  return scanJson(bytes, max, Number.POSITIVE_INFINITY).deeper;
}

/**
 * One pass over a JSON text's bytes: whether it nests deeper than max, and where its string literals of
 * at least minLiteral bytes (between the quotes) stand as values (not as keys: a key is followed by a
 * colon), as [open quote, close quote] index pairs, flat. The scan stops at the first nesting past max.
 * `known`, when given, names the closing quote of a literal it recognises at an opening quote (one seen
 * before, src/util/json-body.ts), or -1: such a literal is stepped over without reading its bytes.
 */
export function scanJson(
  bytes: Uint8Array,
  max: number,
  minLiteral: number,
  known?: (open: number) => number,
): { deeper: boolean; literals: number[] } {
  const literals: number[] = [];
  let depth = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b === 0x22) {
      const seen = known === undefined ? -1 : known(i);
      const close = seen >= 0 ? seen : stringEnd(bytes, i);
      // an unterminated string: nothing after it nests
      if (close < 0) return { deeper: false, literals };
      if (close - i - 1 >= minLiteral && !isKey(bytes, close)) literals.push(i, close);
      i = close;
    } else if (b === 0x7b || b === 0x5b) {
      if (++depth > max) return { deeper: true, literals };
    } else if (b === 0x7d || b === 0x5d) depth--;
  }
  return { deeper: false, literals };
}

/** whether the string closed at `close` is an object key: a colon follows it, after JSON whitespace */
function isKey(bytes: Uint8Array, close: number): boolean {
  for (let i = close + 1; i < bytes.length; i++) {
    const b = bytes[i];
    if (b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09) return b === 0x3a;
  }
  return false;
}

/**
 * The index of the quote that closes the string opened at `open`, or -1 when none does. Byte by byte for
 * a short stretch (strings full of escaped quotes, like a tool call's JSON arguments, close or escape
 * every few bytes), then a native jump to the next quote (a long prompt or tool output is one memchr).
 */
function stringEnd(bytes: Uint8Array, open: number): number {
  let i = open + 1;
  for (;;) {
    const stop = Math.min(bytes.length, i + 32);
    for (; i < stop; i++) {
      const b = bytes[i];
      if (b === 0x5c) i++;
      else if (b === 0x22) return i;
    }
    if (i >= bytes.length) return -1;
    // from i (not inside an escape) to the next quote: escaped when an odd run of backslashes precedes it
    const q = bytes.indexOf(0x22, i);
    if (q < 0) return -1;
    let backslashes = 0;
    while (q - 1 - backslashes >= i && bytes[q - 1 - backslashes] === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return q;
    i = q + 1;
  }
}
