/**
 * Which flag parsers accumulate: each use of the flag adds to its value (`--pass-env A --pass-env B`). A
 * config file's list is one use per item for these (src/options/config.ts), one comma list for the
 * others. The parsers tag themselves where they are declared (src/options/parsers.ts, --pass-env's in
 * src/harnesses/env.ts).
 */
const ACCUMULATING = new WeakSet<object>();
/** Tags a parser as accumulating. */
export function accumulating<F extends (value: string, previous: never) => unknown>(parse: F): F {
  ACCUMULATING.add(parse);
  return parse;
}
/** Whether each use of a flag with this parser adds to its value. */
export const accumulates = (parse: unknown): boolean =>
  typeof parse === 'function' && ACCUMULATING.has(parse);
