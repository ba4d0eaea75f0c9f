/** Canonical response -> non-streaming Anthropic Messages body. */
import type { CanonicalResponse, ToolCall, Usage } from '../canonical.ts';
import { mapFinishReason } from './map-finish-reason.ts';

/**
 * Anthropic's tool_use.input must be an object. Arguments that are not a JSON object (a model that
 * emitted broken JSON) become `{}`: the harness then reports missing arguments to the model, and the
 * exact sampled text stays in the capture record. Streams carry the raw text in input_json_delta.
 */
export function toolInput(args: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(args);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

export function toolUseBlock(call: ToolCall) {
  return { type: 'tool_use', id: call.id, name: call.name, input: toolInput(call.arguments) };
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
