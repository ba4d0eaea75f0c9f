/**
 * How deeply a JSON text nests, measured on its bytes without parsing (no recursion, stops early).
 * Parsing a deep text is fine; walking the parsed value recursively (serialising a record, converting a
 * request, redacting) overflows the stack, so polar refuses such bodies before anything walks them.
 */

/** Nesting polar accepts in a request body: far above any real harness request (tool schemas nest ~20). */
export const MAX_JSON_DEPTH = 256;

/** Why a request body is refused for its nesting (checked before anything parses or walks it), or null. */
export function depthProblem(bytes: Uint8Array): string | null {
  return nestsDeeperThan(bytes, MAX_JSON_DEPTH)
    ? `request body nests deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`
    : null;
}

/** true when the JSON text nests objects/arrays deeper than max (strings are skipped, escapes honoured). */
export function nestsDeeperThan(bytes: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (inString) {
      if (b === 0x5c)
        i++; // backslash: skip the escaped byte
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if (b === 0x7b || b === 0x5b) {
      if (++depth > max) return true;
    } else if (b === 0x7d || b === 0x5d) depth--;
  }
  return false;
}
