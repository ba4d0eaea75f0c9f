/** The front-end wire APIs the proxy serves (each protocol folder's `front`), and the proxy's route table. */
import { front as anthropic } from '../protocols/anthropic-messages/front.ts';
import type { ApiName } from '../protocols/canonical.ts';
import type { FrontProtocol } from '../protocols/front.ts';
import { front as chat } from '../protocols/openai-chat/front.ts';
import { front as responses } from '../protocols/openai-responses/front.ts';

export const PROTOCOLS: Record<ApiName, FrontProtocol> = {
  'openai-responses': responses,
  'anthropic-messages': anthropic,
  'openai-chat': chat,
};

export type Route =
  | { kind: 'model-call'; api: ApiName }
  | { kind: 'count-tokens'; api: ApiName }
  | { kind: 'models'; api: ApiName }
  | { kind: 'health' }
  | { kind: 'unknown'; api: ApiName };

/** method + path (without /v1, query and trailing slash) -> route; the first match wins */
const ROUTES: ReadonlyArray<{ method: string; path: RegExp; route: Route | 'models' }> = [
  { method: 'GET', path: /^\/healthz?$/, route: { kind: 'health' } },
  { method: 'GET', path: /^\/models$/, route: 'models' },
  { method: 'POST', path: /^\/responses$/, route: { kind: 'model-call', api: 'openai-responses' } },
  { method: 'POST', path: /^\/messages$/, route: { kind: 'model-call', api: 'anthropic-messages' } },
  {
    method: 'POST',
    path: /^\/messages\/count_tokens$/,
    route: { kind: 'count-tokens', api: 'anthropic-messages' },
  },
  { method: 'POST', path: /^\/chat\/completions$/, route: { kind: 'model-call', api: 'openai-chat' } },
];

/** Maps method + path to a route. Paths are accepted with or without the /v1 prefix; the query is ignored. */
export function route(method: string, url: string, headers: Record<string, unknown>): Route {
  const path = (url.split('?')[0] ?? '/').replace(/\/+$/, '').replace(/^\/v1(?=\/)/, '');
  const anthropicStyle = 'anthropic-version' in headers || 'x-api-key' in headers;
  for (const r of ROUTES) {
    if (r.method !== method || !r.path.test(path)) continue;
    // the model list answers in the shape of the API the client speaks
    if (r.route === 'models')
      return { kind: 'models', api: 'anthropic-version' in headers ? 'anthropic-messages' : 'openai-chat' };
    return r.route;
  }
  const guess: ApiName =
    path.startsWith('/messages') || anthropicStyle ? 'anthropic-messages' : 'openai-chat';
  return { kind: 'unknown', api: guess };
}
