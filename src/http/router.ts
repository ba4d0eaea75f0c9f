/**
 * Routes as a table: `{ method, path, handler }`, matched in order on the path without its query. The
 * matcher (matchRoute) takes any table of `{ method, path }` entries: the proxy's table names a wire API
 * per route instead of a handler (src/proxy/protocols.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError } from './errors.ts';
import { sendJson } from './reply.ts';

export interface RouteContext {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  /** the path without query (and normalised as the router was told) */
  path: string;
  /** a pattern's capture groups, URI-decoded */
  params: string[];
  query: URLSearchParams;
}

/** A JSON answer; a handler that wrote the response itself returns nothing. */
export interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

export interface Route {
  method: string;
  /** an exact path, or a pattern anchored by its author (`^...$`) */
  path: string | RegExp;
  handler: (ctx: RouteContext) => Promise<Reply | undefined> | Reply | undefined;
}

/** What matchRoute needs of a route: a method and an exact path or an anchored pattern. */
export interface RoutePattern {
  method: string;
  path: string | RegExp;
}

export type Match<R extends RoutePattern = Route> =
  | { route: R; params: string[] }
  | { allowed: string[] }
  | null;

function pathMatches(route: RoutePattern, path: string): string[] | null {
  if (typeof route.path === 'string') return route.path === path ? [] : null;
  const m = route.path.exec(path);
  return m ? m.slice(1).map((p) => (p === undefined ? '' : decodeURIComponent(p))) : null;
}

/** The route for method + path; `{ allowed }` when the path is known under other methods; null when not. */
export function matchRoute<R extends RoutePattern>(
  routes: readonly R[],
  method: string,
  path: string,
): Match<R> {
  const allowed: string[] = [];
  for (const route of routes) {
    const params = pathMatches(route, path);
    if (params === null) continue;
    if (route.method === method) return { route, params };
    allowed.push(route.method);
  }
  return allowed.length > 0 ? { allowed } : null;
}

/** `/a/b/?x=1` -> `/a/b` */
export function pathOf(url: string | undefined): string {
  return (url ?? '/').split('?')[0]!.replace(/(?<=.)\/+$/, '');
}

/**
 * Answers a request from the table: the handler's reply as JSON, 405 for a known path under another
 * method. Resolves false (nothing sent) when no route has the path. A handler's error propagates.
 */
export async function dispatch(
  routes: readonly Route[],
  req: IncomingMessage,
  res: ServerResponse,
  path = pathOf(req.url),
): Promise<boolean> {
  const method = req.method ?? 'GET';
  const match = matchRoute(routes, method, path);
  if (match === null) return false;
  if ('allowed' in match) {
    req.resume();
    throw new HttpError(405, `${method} ${path} is not a route (allowed: ${match.allowed.join(', ')})`);
  }
  const query = new URL(req.url ?? '/', 'http://polar.invalid').searchParams;
  const reply = await match.route.handler({ req, res, method, path, params: match.params, query });
  if (reply) sendJson(res, reply.status, reply.body, reply.headers);
  return true;
}
