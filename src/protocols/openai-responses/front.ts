/** The OpenAI Responses API as the proxy serves it. */

import type { FrontProtocol } from '../front.ts';
import { renderModelList } from '../openai-chat/model-list.ts';
import { parseRequest } from './convert-request.ts';
import { renderError } from './errors.ts';
import { renderResponse } from './render-response.ts';
import { createStreamWriter } from './stream-writer.ts';

export const front: FrontProtocol = {
  api: 'openai-responses',
  parseRequest,
  renderResponse,
  createStreamWriter: (ctx) => createStreamWriter({ created: ctx.created }),
  renderError,
  // the Responses API lists models at the same OpenAI endpoint
  renderModelList,
};
