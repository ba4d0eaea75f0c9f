import type { FinishReason } from '../canonical.ts';

/** Chat Completions finish_reason <-> canonical. The one mapper for this API. */
export function fromChatFinishReason(reason: string | null | undefined, hasToolCalls: boolean): FinishReason {
  switch (reason) {
    case 'length':
      return 'length';
    case 'tool_calls':
    case 'function_call':
      return 'tool_calls';
    case 'content_filter':
      return 'content_filter';
    case 'error':
      return 'error';
    default:
      return hasToolCalls ? 'tool_calls' : 'stop';
  }
}

export function toChatFinishReason(reason: FinishReason): string {
  return reason === 'error' ? 'stop' : reason;
}
