/**
 * Canonical finish reason -> Gemini `finishReason` (the FinishReason enum of @google/genai). A turn that
 * ends in function calls is `STOP` in Gemini. The one mapper for this API.
 */
import type { FinishReason } from '../canonical.ts';

export type GeminiFinishReason = 'STOP' | 'MAX_TOKENS' | 'SAFETY' | 'OTHER';

export function mapFinishReason(reason: FinishReason): GeminiFinishReason {
  switch (reason) {
    case 'stop':
    case 'tool_calls':
      return 'STOP';
    case 'length':
      return 'MAX_TOKENS';
    case 'content_filter':
      return 'SAFETY';
    case 'error':
      return 'OTHER';
  }
}
