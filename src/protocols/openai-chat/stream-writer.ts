/** Canonical events -> Chat Completions SSE for a harness. Stateful; never throws. */
import type { StreamEvent } from '../canonical.ts';
import { errorBody } from '../openai-errors.ts';
import { encodeSse } from '../sse.ts';
import { toChatFinishReason } from './map-finish-reason.ts';

export function createStreamWriter(ctx: { created: number; includeUsage?: boolean }) {
  let id = 'chatcmpl';
  let model = '';
  let roleSent = false;
  // every chunk of the stream starts with the same text up to its delta: written once (a chunk per token
  // is on the proxy's hot path), the same bytes JSON.stringify gives for the whole chunk object
  let head = '';
  const start = () =>
    `data: {"id":${JSON.stringify(id)},"object":"chat.completion.chunk","created":${JSON.stringify(ctx.created)},"model":${JSON.stringify(model)},"choices":[{"index":0,"delta":`;
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => {
    if (head === '') head = start();
    return `${head}${JSON.stringify(delta)},"finish_reason":${JSON.stringify(finish)}}]}\n\n`;
  };
  const withRole = (delta: Record<string, unknown>) => {
    if (roleSent) return delta;
    roleSent = true;
    return { role: 'assistant', ...delta };
  };
  return {
    write(event: StreamEvent): string {
      switch (event.type) {
        case 'start':
          id = event.id;
          model = event.model;
          head = '';
          return '';
        case 'reasoning-delta':
          return chunk(withRole({ reasoning_content: event.text }));
        case 'text-delta':
          return chunk(withRole({ content: event.text }));
        case 'tool-call-start':
          return chunk(
            withRole({
              tool_calls: [
                {
                  index: event.index,
                  id: event.id,
                  type: 'function',
                  function: { name: event.name, arguments: '' },
                },
              ],
            }),
          );
        case 'tool-call-delta':
          return chunk(
            withRole({ tool_calls: [{ index: event.index, function: { arguments: event.arguments } }] }),
          );
        case 'tool-call-end':
          return '';
        case 'finish': {
          const r = event.response;
          let out = roleSent ? '' : chunk(withRole({ content: '' }));
          out += chunk({}, toChatFinishReason(r.finishReason));
          if (ctx.includeUsage) {
            out += encodeSse({
              id,
              object: 'chat.completion.chunk',
              created: ctx.created,
              model,
              choices: [],
              usage: {
                prompt_tokens: r.usage.promptTokens,
                completion_tokens: r.usage.completionTokens,
                total_tokens: r.usage.promptTokens + r.usage.completionTokens,
              },
            });
          }
          return out + encodeSse('[DONE]');
        }
        case 'error':
          return encodeSse(errorBody(event.error));
        default: {
          const never: never = event;
          return never;
        }
      }
    },
  };
}
