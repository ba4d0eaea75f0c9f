/** The Gemini API (generateContent, streamGenerateContent, countTokens) as the proxy serves it. */
import type { FrontProtocol } from '../front.ts';
import { parseCountTokensRequest, parseRequest, renderCountTokens } from './convert-request.ts';
import { renderError } from './errors.ts';
import { renderModelList } from './model-list.ts';
import { renderResponse } from './render-response.ts';
import { createStreamWriter } from './stream-writer.ts';

export const front: FrontProtocol = {
  api: 'gemini',
  parseRequest,
  renderResponse,
  createStreamWriter: (ctx) => createStreamWriter({ created: ctx.created }),
  renderError,
  renderModelList,
  countTokens: {
    api: 'gemini-count-tokens',
    parseRequest: parseCountTokensRequest,
    render: renderCountTokens,
  },
};
