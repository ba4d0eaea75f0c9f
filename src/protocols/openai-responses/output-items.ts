/** Builders for Responses output items and the response object, shared by render-response and the writer. */
import type { ProxyFault, ToolCall, Usage } from '../canonical.ts';
import type { ResponsesStatus } from './map-finish-reason.ts';
import { wireToolName } from './tool-names.ts';

export function reasoningItem(id: string, text: string, signature: string | undefined) {
  return {
    type: 'reasoning',
    id,
    summary: text ? [{ type: 'summary_text', text }] : [],
    encrypted_content: signature ?? null,
  };
}

export function textPart(text: string) {
  return { type: 'output_text', text, annotations: [] as unknown[] };
}

export function messageItem(id: string, text: string, status: 'in_progress' | 'completed' = 'completed') {
  return {
    type: 'message',
    id,
    status,
    role: 'assistant',
    content: status === 'completed' ? [textPart(text)] : [],
  };
}

/** A namespaced canonical name (`ns.name`) goes back as separate `namespace` and `name` fields. */
export function functionCallItem(
  id: string,
  call: ToolCall,
  status: 'in_progress' | 'completed' = 'completed',
) {
  const { name, namespace } = wireToolName(call.name);
  return {
    type: 'function_call',
    id,
    call_id: call.id,
    name,
    ...(namespace ? { namespace } : {}),
    arguments: status === 'completed' ? call.arguments : '',
    status,
  };
}

export function renderUsage(usage: Usage) {
  return {
    input_tokens: usage.promptTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: usage.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

export interface ResponseObjectInput {
  id: string;
  created: number;
  model: string;
  state: ResponsesStatus | { status: 'in_progress' };
  output: unknown[];
  usage?: Usage;
  error?: ProxyFault;
}

export function responseObject(r: ResponseObjectInput) {
  return {
    id: r.id,
    object: 'response',
    created_at: r.created,
    model: r.model,
    status: r.state.status,
    ...(r.state.status === 'incomplete' ? { incomplete_details: { reason: r.state.reason } } : {}),
    ...(r.error ? { error: { code: r.error.kind, message: r.error.message } } : {}),
    output: r.output,
    ...(r.usage ? { usage: renderUsage(r.usage) } : {}),
  };
}
