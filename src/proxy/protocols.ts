/** The front-end wire APIs the proxy serves, behind one interface. */
import * as anthropic from '../protocols/anthropic-messages/index.ts';
import type {
  ApiName,
  CanonicalRequest,
  CanonicalResponse,
  Converted,
  ProxyFault,
  StreamEvent,
} from '../protocols/canonical.ts';
import * as chat from '../protocols/openai-chat/index.ts';
import * as responses from '../protocols/openai-responses/index.ts';

export interface FrontProtocol {
  api: ApiName;
  parseRequest(body: unknown): Converted<CanonicalRequest>;
  renderResponse(response: CanonicalResponse, ctx: { created: number }): unknown;
  createStreamWriter(ctx: { created: number; body: unknown }): { write(event: StreamEvent): string };
  renderError(fault: ProxyFault): { status: number; body: unknown };
}

export const PROTOCOLS: Record<ApiName, FrontProtocol> = {
  'openai-responses': {
    api: 'openai-responses',
    parseRequest: responses.parseRequest,
    renderResponse: responses.renderResponse,
    createStreamWriter: (ctx) => responses.createStreamWriter({ created: ctx.created }),
    renderError: responses.renderError,
  },
  'anthropic-messages': {
    api: 'anthropic-messages',
    parseRequest: anthropic.parseRequest,
    renderResponse: anthropic.renderResponse,
    createStreamWriter: (ctx) => anthropic.createStreamWriter({ created: ctx.created }),
    renderError: anthropic.renderError,
  },
  'openai-chat': {
    api: 'openai-chat',
    parseRequest: chat.parseRequest,
    renderResponse: chat.renderResponse,
    createStreamWriter: (ctx) =>
      chat.createStreamWriter({ created: ctx.created, includeUsage: chat.wantsUsage(ctx.body) }),
    renderError: chat.renderError,
  },
};

export { anthropic };

export type Route =
  | { kind: 'model-call'; api: ApiName }
  | { kind: 'count-tokens' }
  | { kind: 'models' }
  | { kind: 'health' }
  | { kind: 'unknown'; api: ApiName };

/** Maps method + path to a route. Paths are accepted with or without the /v1 prefix; the query is ignored. */
export function route(method: string, url: string, headers: Record<string, unknown>): Route {
  const path = (url.split('?')[0] ?? '/').replace(/\/+$/, '').replace(/^\/v1(?=\/)/, '');
  const anthropicStyle = 'anthropic-version' in headers || 'x-api-key' in headers;
  const guess: ApiName =
    path.startsWith('/messages') || anthropicStyle ? 'anthropic-messages' : 'openai-chat';
  if (method === 'GET' && (path === '/health' || path === '/healthz')) return { kind: 'health' };
  if (method === 'GET' && path === '/models') return { kind: 'models' };
  if (method === 'POST') {
    if (path === '/responses') return { kind: 'model-call', api: 'openai-responses' };
    if (path === '/messages') return { kind: 'model-call', api: 'anthropic-messages' };
    if (path === '/messages/count_tokens') return { kind: 'count-tokens' };
    if (path === '/chat/completions') return { kind: 'model-call', api: 'openai-chat' };
  }
  return { kind: 'unknown', api: guess };
}
