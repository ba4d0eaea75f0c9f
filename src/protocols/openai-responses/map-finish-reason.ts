/** Canonical finish reason -> Responses status. The one mapper for this API. */
import type { FinishReason } from '../canonical.ts';

export type ResponsesStatus =
  | { status: 'completed' }
  | { status: 'incomplete'; reason: 'max_output_tokens' | 'content_filter' }
  | { status: 'failed' };

export function mapFinishReason(reason: FinishReason): ResponsesStatus {
  switch (reason) {
    case 'stop':
    case 'tool_calls':
      return { status: 'completed' };
    case 'length':
      return { status: 'incomplete', reason: 'max_output_tokens' };
    case 'content_filter':
      return { status: 'incomplete', reason: 'content_filter' };
    case 'error':
      return { status: 'failed' };
  }
}
