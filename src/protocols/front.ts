/**
 * What a front protocol (the wire API a harness speaks) gives the proxy: request in, response and stream
 * out, errors in its own shape, its model list and, where the API has one, its token-count endpoint.
 * Each protocol folder's index exports its `front`.
 */
import type {
  ApiName,
  CanonicalRequest,
  CanonicalResponse,
  Converted,
  ProxyFault,
  StreamEvent,
  TokenCountApi,
} from './canonical.ts';

/** Where a request was sent: its path and query as received (Gemini names the model and method there). */
export interface RequestTarget {
  path: string;
}

export interface FrontProtocol {
  api: ApiName;
  parseRequest(body: unknown, target: RequestTarget): Converted<CanonicalRequest>;
  renderResponse(response: CanonicalResponse, ctx: { created: number }): unknown;
  createStreamWriter(ctx: { created: number; body: unknown }): { write(event: StreamEvent): string };
  renderError(fault: ProxyFault): { status: number; body: unknown };
  /** GET /v1/models in this API's shape, listing the one model polar serves */
  renderModelList(model: string): unknown;
  /** a token-count endpoint (Anthropic's POST /v1/messages/count_tokens, Gemini's :countTokens) */
  countTokens?: {
    /** the call record's `api` for it */
    api: TokenCountApi;
    parseRequest(body: unknown, target: RequestTarget): Converted<CanonicalRequest>;
    render(tokens: number): unknown;
  };
}
