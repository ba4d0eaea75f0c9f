/** Canonical response -> non-streaming Anthropic Messages body. */
import type { CanonicalResponse, ToolCall, Usage } from '../canonical.ts';
import { argumentsObject } from '../tool-arguments.ts';
import { mapFinishReason } from './map-finish-reason.ts';

/** Streams carry the raw argument text in input_json_delta; a whole message needs an object. */
export function toolUseBlock(call: ToolCall) {
  return { type: 'tool_use', id: call.id, name: call.name, input: argumentsObject(call.arguments) };
}

export function renderUsage(usage: Usage) {
  return {
    input_tokens: usage.promptTokens,
    output_tokens: usage.completionTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
  };
}

export function renderResponse(response: CanonicalResponse, _ctx: { created: number }): unknown {
  const content: unknown[] = [];
  if (response.reasoning) {
    content.push({
      type: 'thinking',
      thinking: response.reasoning,
      signature: response.reasoningSignature ?? '',
    });
  }
  if (response.content || response.toolCalls.length === 0)
    content.push({ type: 'text', text: response.content });
  content.push(...response.toolCalls.map(toolUseBlock));
  return {
    id: response.id,
    type: 'message',
    role: 'assistant',
    model: response.model,
    content,
    stop_reason: mapFinishReason(response),
    stop_sequence: response.stopSequence ?? null,
    usage: renderUsage(response.usage),
  };
}
