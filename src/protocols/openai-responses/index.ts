/** OpenAI Responses API front end (Codex CLI, Pi): harness traffic <-> canonical chat form. */
import type { ApiName } from '../canonical.ts';

export const api: ApiName = 'openai-responses';
export { parseRequest } from './convert-request.ts';
export { renderError } from './errors.ts';
export { mapFinishReason } from './map-finish-reason.ts';
export { renderResponse } from './render-response.ts';
export { createStreamWriter } from './stream-writer.ts';
export { flatToolName, wireToolName } from './tool-names.ts';
