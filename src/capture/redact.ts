/**
 * Removes credentials from what gets recorded: auth headers, API keys, cookies (URLs: redactUrl in
 * src/util/redact.ts).
 */
const SECRET_HEADER =
  /^(authorization|proxy-authorization|x-api-key|api-key|cookie|set-cookie|openai-organization|openai-project)$|^x-auth|key|token|secret/i;

export function redactHeaders(
  headers: Record<string, string | string[] | undefined>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const text = Array.isArray(value) ? value.join(', ') : value;
    out[name] = SECRET_HEADER.test(name) ? redacted(text) : text;
  }
  return out;
}

function redacted(value: string): string {
  const scheme = /^(Bearer|Basic)\s/i.exec(value)?.[1];
  return scheme ? `${scheme} <redacted>` : '<redacted>';
}

/** Replaces every occurrence of the given secrets inside any string of a JSON value. */
export function redactSecrets<T>(value: T, secrets: string[]): T {
  const live = secrets.filter((s) => s.length >= 8);
  if (live.length === 0) return value;
  const scrub = (v: unknown): unknown => {
    if (typeof v === 'string') return live.reduce((s, secret) => s.split(secret).join('<redacted>'), v);
    if (Array.isArray(v)) return v.map(scrub);
    if (v && typeof v === 'object')
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, scrub(x)]));
    return v;
  };
  return scrub(value) as T;
}
