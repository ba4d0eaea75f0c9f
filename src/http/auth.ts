/**
 * Bearer tokens for polar's servers: generated when the user gives none, compared in constant time
 * (crypto.timingSafeEqual over SHA-256 digests, so neither the content nor the length leaks), and
 * looked up by digest where many keys are live (the proxy's per-session keys).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export function tokenDigest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** whether the presented token is the expected one, in time independent of where they differ */
export function sameToken(presented: string | undefined, expected: string): boolean {
  if (presented === undefined) return false;
  return timingSafeEqual(tokenDigest(presented), tokenDigest(expected));
}

/**
 * the token of `Authorization: Bearer <token>`, or, when allowed, of an API-key header: `x-api-key`
 * (Anthropic) or `x-goog-api-key` (Gemini, what the @google/genai SDK sends), else Google's `?key=`
 */
export function presentedToken(
  req: IncomingMessage,
  options: { apiKeyHeader?: boolean } = {},
): string | undefined {
  const bearer = /^Bearer\s+(.+)$/i.exec(String(req.headers.authorization ?? ''))?.[1]?.trim();
  if (bearer) return bearer;
  if (!options.apiKeyHeader) return undefined;
  for (const name of ['x-api-key', 'x-goog-api-key']) {
    const key = req.headers[name];
    if (typeof key === 'string' && key.trim()) return key.trim();
  }
  const q = (req.url ?? '').indexOf('?');
  const key = q < 0 ? null : new URLSearchParams((req.url ?? '').slice(q + 1)).get('key');
  return key?.trim() || undefined;
}

/** a fresh random token (printed once by the server that made it) */
export function newToken(prefix: string): string {
  return `${prefix}-${randomBytes(24).toString('base64url')}`;
}

/** whether a bind address only this machine can reach */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}
