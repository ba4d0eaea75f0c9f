/** The Responses API's error shape is OpenAI's, shared with Chat Completions. */
export { errorBody, errorType, renderError } from '../openai-errors.ts';
