/** OpenAI Chat Completions as the proxy serves it. */
import type { FrontProtocol } from '../front.ts';
import { parseRequest, wantsUsage } from './convert-request.ts';
import { renderError } from './errors.ts';
import { renderModelList } from './model-list.ts';
import { renderResponse } from './render-response.ts';
import { createStreamWriter } from './stream-writer.ts';

export const front: FrontProtocol = {
  api: 'openai-chat',
  parseRequest,
  renderResponse,
  createStreamWriter: (ctx) =>
    createStreamWriter({ created: ctx.created, includeUsage: wantsUsage(ctx.body) }),
  renderError,
  renderModelList,
};
