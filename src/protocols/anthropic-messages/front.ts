/** The Anthropic Messages API as the proxy serves it. */
import type { FrontProtocol } from '../front.ts';
import { parseCountTokensRequest, parseRequest, renderCountTokens } from './convert-request.ts';
import { renderError } from './errors.ts';
import { renderModelList } from './model-list.ts';
import { renderResponse } from './render-response.ts';
import { createStreamWriter } from './stream-writer.ts';

export const front: FrontProtocol = {
  api: 'anthropic-messages',
  parseRequest,
  renderResponse,
  createStreamWriter: (ctx) => createStreamWriter({ created: ctx.created }),
  renderError,
  renderModelList,
  countTokens: {
    api: 'anthropic-count-tokens',
    parseRequest: parseCountTokensRequest,
    render: renderCountTokens,
  },
};
