/** Canonical response -> Chat Completions JSON (non-streaming answer to a harness). */
import type { CanonicalResponse } from '../canonical.ts';
import { toChatFinishReason } from './map-finish-reason.ts';

export function renderResponse(r: CanonicalResponse, ctx: { created: number }): Record<string, unknown> {
  return {
    id: r.id,
    object: 'chat.completion',
    created: ctx.created,
    model: r.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: r.content || (r.toolCalls.length ? null : ''),
          ...(r.reasoning ? { reasoning_content: r.reasoning } : {}),
          ...(r.toolCalls.length
            ? {
                tool_calls: r.toolCalls.map((c) => ({
                  id: c.id,
                  type: 'function',
                  function: { name: c.name, arguments: c.arguments },
                })),
              }
            : {}),
        },
        finish_reason: toChatFinishReason(r.finishReason),
      },
    ],
    usage: {
      prompt_tokens: r.usage.promptTokens,
      completion_tokens: r.usage.completionTokens,
      total_tokens: r.usage.promptTokens + r.usage.completionTokens,
    },
  };
}
