/**
 * The one redaction of URLs: credentials a URL carries never reach a capture, a log line, a status
 * page or a message. Used wherever a URL is stored or printed (the capture's session and call records,
 * polar serve's /status, polar gym's /health, the proxy's faults, polar's log, a loop's config.json).
 */

/** Query parameters that carry credentials (`?api_key=`, `?key=`, `?token=`, ...). */
const SECRET_PARAM = /^(api[-_]?key|key|token|access[-_]token|auth|secret|password|sig|signature)$/i;

/** `scheme://user:password@`: the userinfo of every URL in a text */
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@'"<>`]+@/gi;
/** `?name=value` / `&name=value`: every query parameter in a text */
const PARAM = /([?&])([^=&#\s'"<>`]+)=([^&#\s'"<>`]*)/g;

/**
 * A URL, a request path, or a text quoting URLs (an error message), with the userinfo of each URL and
 * the values of credential query parameters replaced by `<redacted>`; everything else as it was.
 */
export function redactUrl(text: string): string {
  if (!text.includes('@') && !text.includes('=')) return text;
  return text.replace(USERINFO, '$1<redacted>@').replace(PARAM, (whole, sep: string, name: string) => {
    const plain = name.replace(/%5F/gi, '_').replace(/%2D/gi, '-');
    return SECRET_PARAM.test(plain) ? `${sep}${name}=<redacted>` : whole;
  });
}
