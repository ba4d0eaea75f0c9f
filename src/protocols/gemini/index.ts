/** Gemini API front end (Gemini CLI): harness traffic <-> canonical chat form. */
import type { ApiName } from '../canonical.ts';

export const api: ApiName = 'gemini';
export { parseCountTokensRequest, parseRequest, renderCountTokens } from './convert-request.ts';
export { renderError } from './errors.ts';
export { mapFinishReason } from './map-finish-reason.ts';
export { renderModelList } from './model-list.ts';
export { renderResponse } from './render-response.ts';
export { createStreamWriter } from './stream-writer.ts';
export { parseTarget } from './target.ts';
