/**
 * Canonical response -> a Gemini `GenerateContentResponse` (non-streaming answer, and the pieces the
 * stream writer sends). Reasoning goes out as a `thought: true` text part; the turn's round-trip key (the
 * reasoningSignature polar minted) as the `thoughtSignature` of the first part that is not a thought,
 * which Gemini CLI keeps in the history it resends (it strips thought parts, never signatures).
 */
import type { CanonicalResponse, ToolCall, Usage } from '../canonical.ts';
import { argumentsObject } from '../tool-arguments.ts';
import { mapFinishReason } from './map-finish-reason.ts';

export type GeminiPart = Record<string, unknown>;

export function functionCallPart(call: ToolCall): GeminiPart {
  return { functionCall: { id: call.id, name: call.name, args: argumentsObject(call.arguments) } };
}

export function renderUsage(usage: Usage) {
  return {
    promptTokenCount: usage.promptTokens,
    candidatesTokenCount: usage.completionTokens,
    totalTokenCount: usage.promptTokens + usage.completionTokens,
  };
}

/** one candidate chunk: `{candidates: [{content, finishReason?, index}], usageMetadata?, ...}` */
export function chunk(
  id: string,
  model: string,
  parts: GeminiPart[],
  end?: { response: CanonicalResponse },
): Record<string, unknown> {
  const candidate: Record<string, unknown> = { content: { role: 'model', parts }, index: 0 };
  if (end) candidate.finishReason = mapFinishReason(end.response.finishReason);
  return {
    candidates: [candidate],
    ...(end ? { usageMetadata: renderUsage(end.response.usage) } : {}),
    modelVersion: model,
    responseId: id,
  };
}

export function renderResponse(r: CanonicalResponse, _ctx: { created: number }): unknown {
  const parts: GeminiPart[] = [];
  if (r.reasoning) parts.push({ text: r.reasoning, thought: true });
  const answer: GeminiPart[] = [];
  if (r.content || r.toolCalls.length === 0) answer.push({ text: r.content });
  answer.push(...r.toolCalls.map(functionCallPart));
  if (r.reasoningSignature) answer[0] = { ...answer[0], thoughtSignature: r.reasoningSignature };
  return chunk(r.id, r.model, [...parts, ...answer], { response: r });
}
