/** The front-end wire APIs the proxy serves (each protocol folder's `front`), and the proxy's route table. */

import { matchRoute, pathOf, type RoutePattern } from '../http/router.ts';
import { front as anthropic } from '../protocols/anthropic-messages/front.ts';
import type { ApiName } from '../protocols/canonical.ts';
import type { FrontProtocol } from '../protocols/front.ts';
import { front as gemini } from '../protocols/gemini/front.ts';
import { front as chat } from '../protocols/openai-chat/front.ts';
import { front as responses } from '../protocols/openai-responses/front.ts';

export const PROTOCOLS: Record<ApiName, FrontProtocol> = {
  'openai-responses': responses,
  'anthropic-messages': anthropic,
  'openai-chat': chat,
  gemini,
};

export type Route =
  | { kind: 'model-call'; api: ApiName }
  | { kind: 'count-tokens'; api: ApiName }
  | { kind: 'models'; api: ApiName }
  | { kind: 'health' }
  | { kind: 'unknown'; api: ApiName };

/** Gemini's versioned paths, `/v1beta/...` (`/v1/` is stripped like the other APIs' prefix) */
const GEMINI_VERSION = /^\/v1(?:beta|alpha)\d*(?=\/)/;

/** method + path (without /v1, query and trailing slash) -> route; the first match wins (matchRoute) */
const ROUTES: ReadonlyArray<RoutePattern & { route: Route | 'models' }> = [
  { method: 'GET', path: /^\/healthz?$/, route: { kind: 'health' } },
  { method: 'GET', path: '/models', route: 'models' },
  { method: 'POST', path: '/responses', route: { kind: 'model-call', api: 'openai-responses' } },
  { method: 'POST', path: '/messages', route: { kind: 'model-call', api: 'anthropic-messages' } },
  {
    method: 'POST',
    path: '/messages/count_tokens',
    route: { kind: 'count-tokens', api: 'anthropic-messages' },
  },
  { method: 'POST', path: '/chat/completions', route: { kind: 'model-call', api: 'openai-chat' } },
  // Gemini: /v1beta/models/{model}:{method} (a model name may hold slashes; protocols/gemini/target.ts)
  {
    method: 'POST',
    path: /^\/(?:models|tunedModels)\/.+:(?:generateContent|streamGenerateContent)$/,
    route: { kind: 'model-call', api: 'gemini' },
  },
  {
    method: 'POST',
    path: /^\/(?:models|tunedModels)\/.+:countTokens$/,
    route: { kind: 'count-tokens', api: 'gemini' },
  },
];

/**
 * Maps method + path to a route. Paths are accepted with or without the /v1 prefix; the query is ignored;
 * a path under another method is `unknown` (answered 404 in the API's error shape, as any unknown path).
 */
export function route(method: string, url: string, headers: Record<string, unknown>): Route {
  const raw = pathOf(url);
  const geminiVersion = GEMINI_VERSION.test(raw);
  const path = raw.replace(/^\/v1(?=\/)/, '').replace(GEMINI_VERSION, '');
  const anthropicStyle = 'anthropic-version' in headers || 'x-api-key' in headers;
  const geminiStyle =
    geminiVersion || 'x-goog-api-key' in headers || /^\/(models|tunedModels)\/.+:/.test(path);
  const match = matchRoute(ROUTES, method, path);
  if (match !== null && 'route' in match) {
    if (match.route.route !== 'models') return match.route.route;
    // the model list answers in the shape of the API the client speaks
    const api = geminiStyle
      ? 'gemini'
      : 'anthropic-version' in headers
        ? 'anthropic-messages'
        : 'openai-chat';
    return { kind: 'models', api };
  }
  const guess: ApiName = geminiStyle
    ? 'gemini'
    : path.startsWith('/messages') || anthropicStyle
      ? 'anthropic-messages'
      : 'openai-chat';
  return { kind: 'unknown', api: guess };
}
