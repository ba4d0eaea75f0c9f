/** Anthropic Messages API front end (Claude Code, Pi): harness traffic <-> canonical chat form. */
import type { ApiName } from '../canonical.ts';

export const api: ApiName = 'anthropic-messages';
export { parseCountTokensRequest, parseRequest, renderCountTokens } from './convert-request.ts';
export { renderError } from './errors.ts';
export { mapFinishReason } from './map-finish-reason.ts';
export { renderResponse } from './render-response.ts';
export { createStreamWriter } from './stream-writer.ts';
