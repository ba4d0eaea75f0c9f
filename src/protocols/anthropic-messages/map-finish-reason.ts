/** Canonical finish reason -> Anthropic stop_reason. The one mapper for this API. */
import type { CanonicalResponse } from '../canonical.ts';

export type StopReason = 'end_turn' | 'max_tokens' | 'tool_use' | 'stop_sequence' | 'refusal';

export function mapFinishReason(
  response: Pick<CanonicalResponse, 'finishReason' | 'stopSequence'>,
): StopReason {
  switch (response.finishReason) {
    case 'stop':
      return response.stopSequence ? 'stop_sequence' : 'end_turn';
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    case 'error':
      return 'end_turn';
  }
}
