/** Chat Completions' error shape is OpenAI's, shared with the Responses API. */
export { errorBody, renderError } from '../openai-errors.ts';
