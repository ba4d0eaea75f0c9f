/** OpenAI Chat Completions: front end (harness side) and back end (inference-server side). */
export const api = 'openai-chat' as const;
export { buildRequest } from './build-request.ts';
export { parseRequest, wantsUsage } from './convert-request.ts';
export { renderError } from './errors.ts';
export { fromChatFinishReason, toChatFinishReason } from './map-finish-reason.ts';
export { renderResponse } from './render-response.ts';
export { ChatStreamParser, completionToEvents } from './stream-parser.ts';
export { createStreamWriter } from './stream-writer.ts';
