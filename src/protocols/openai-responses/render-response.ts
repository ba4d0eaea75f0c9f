/** Canonical response -> non-streaming Responses API body. */
import { type CanonicalResponse, fault, newId } from '../canonical.ts';
import { mapFinishReason } from './map-finish-reason.ts';
import { functionCallItem, messageItem, reasoningItem, responseObject } from './output-items.ts';

export function renderResponse(response: CanonicalResponse, ctx: { created: number }): unknown {
  const output: unknown[] = [];
  if (response.reasoning) {
    output.push(reasoningItem(newId('rs'), response.reasoning, response.reasoningSignature));
  }
  if (response.content || response.toolCalls.length === 0)
    output.push(messageItem(newId('msg'), response.content));
  for (const call of response.toolCalls) output.push(functionCallItem(newId('fc'), call));
  const state = mapFinishReason(response.finishReason);
  return responseObject({
    id: response.id,
    created: ctx.created,
    model: response.model,
    state,
    output,
    usage: response.usage,
    ...(state.status === 'failed' ? { error: fault('backend_error', 'the backend reported an error') } : {}),
  });
}
