/** Responses API request (Codex CLI, Pi) -> canonical request. */
import type {
  AssistantMessage,
  CanonicalMessage,
  CanonicalRequest,
  Converted,
  UserPart,
} from '../canonical.ts';
import { parseOrThrow } from '../validate.ts';
import { convertToolChoice, convertTools } from './convert-tools.ts';
import {
  type ContentPart,
  customToolCallItemSchema,
  functionCallItemSchema,
  functionCallOutputItemSchema,
  itemHeadSchema,
  messageItemSchema,
  reasoningItemSchema,
  requestSchema,
} from './responses-api.ts';
import { flatToolName } from './tool-names.ts';

/**
 * Builds the canonical history. Reasoning, assistant message and function_call items that follow each
 * other fold into ONE canonical assistant message (content before tool calls, as a model samples them);
 * any other item closes it. Reasoning attaches to the assistant turn that follows it.
 */
class History {
  readonly messages: CanonicalMessage[] = [];
  private open: AssistantMessage | undefined;
  private readonly callNames = new Map<string, string>();

  push(message: CanonicalMessage): void {
    this.open = undefined;
    this.messages.push(message);
  }

  assistant(kind: 'reasoning' | 'text' | 'call'): AssistantMessage {
    const o = this.open;
    const fresh = o !== undefined && o.content === '' && o.toolCalls.length === 0;
    if (o && (kind === 'call' || fresh)) return o;
    const message: AssistantMessage = { role: 'assistant', content: '', toolCalls: [] };
    this.push(message);
    this.open = message;
    return message;
  }

  call(id: string, name: string, args: string): void {
    this.assistant('call').toolCalls.push({ id, name, arguments: args });
    this.callNames.set(id, name);
  }

  result(toolCallId: string, content: string): void {
    const name = this.callNames.get(toolCallId);
    this.push({ role: 'tool', toolCallId, ...(name ? { name } : {}), content });
  }
}

function userParts(parts: string | ContentPart[], warnings: string[], where: string): UserPart[] {
  if (typeof parts === 'string') return [{ type: 'text', text: parts }];
  const out: UserPart[] = [];
  for (const part of parts) {
    if (typeof part.text === 'string' && part.type !== 'input_image')
      out.push({ type: 'text', text: part.text });
    else if (part.type === 'input_image' && part.image_url) out.push({ type: 'image', url: part.image_url });
    else warnings.push(`${where}: dropped content part of type ${part.type}`);
  }
  return out;
}

function textOf(parts: string | ContentPart[], warnings: string[], where: string, sep: string): string {
  return userParts(parts, warnings, where)
    .map((p) => {
      if (p.type === 'text') return p.text;
      warnings.push(`${where}: dropped image (no place for it in this role)`);
      return '';
    })
    .join(sep);
}

function convertItem(raw: unknown, i: number, h: History, warnings: string[]): void {
  const path = ['input', i];
  const where = `input[${i}]`;
  const head = parseOrThrow(itemHeadSchema, raw, path);
  const type = head.type ?? (head.role !== undefined ? 'message' : undefined);
  switch (type) {
    case 'message': {
      const m = parseOrThrow(messageItemSchema, raw, path);
      if (m.role === 'user') h.push({ role: 'user', content: userParts(m.content, warnings, where) });
      else if (m.role === 'assistant') h.assistant('text').content = textOf(m.content, warnings, where, '');
      // several text parts of a developer/system message are separate blocks of instructions
      else h.push({ role: 'system', content: textOf(m.content, warnings, where, '\n\n') });
      return;
    }
    case 'function_call': {
      const c = parseOrThrow(functionCallItemSchema, raw, path);
      h.call(c.call_id, flatToolName(c.name, c.namespace), c.arguments);
      return;
    }
    case 'custom_tool_call': {
      const c = parseOrThrow(customToolCallItemSchema, raw, path);
      warnings.push(
        `${where}: custom_tool_call ${c.name} represented as a function call with arguments {input}`,
      );
      h.call(c.call_id, c.name, JSON.stringify({ input: c.input }));
      return;
    }
    case 'function_call_output':
    case 'custom_tool_call_output': {
      const r = parseOrThrow(functionCallOutputItemSchema, raw, path);
      h.result(r.call_id, textOf(r.output, warnings, where, ''));
      return;
    }
    case 'reasoning': {
      const r = parseOrThrow(reasoningItemSchema, raw, path);
      // raw reasoning text (content) is closer to the sampled tokens than a summary, when present
      const parts = r.content?.length ? r.content : (r.summary ?? []);
      const text = parts.map((p) => p.text).join('\n\n');
      if (!text && !r.encrypted_content) return;
      const target = h.assistant('reasoning');
      if (text) target.reasoning = target.reasoning ? `${target.reasoning}\n\n${text}` : text;
      if (r.encrypted_content) target.reasoningSignature = r.encrypted_content;
      return;
    }
    default:
      warnings.push(`${where}: dropped item type ${type ?? '(none)'}`);
  }
}

export function parseRequest(body: unknown): Converted<CanonicalRequest> {
  const req = parseOrThrow(requestSchema, body);
  const warnings: string[] = [];
  const h = new History();
  if (req.instructions) h.push({ role: 'system', content: req.instructions });
  const input = typeof req.input === 'string' ? [{ role: 'user', content: req.input }] : (req.input ?? []);
  input.forEach((item, i) => {
    convertItem(item, i, h, warnings);
  });
  if (req.previous_response_id) {
    warnings.push(
      'previous_response_id ignored: the proxy is stateless, the harness must resend the history',
    );
  }
  const effort = req.reasoning?.effort ?? undefined;
  const value: CanonicalRequest = {
    model: req.model,
    messages: h.messages,
    tools: convertTools(req.tools ?? [], warnings),
    stream: req.stream ?? false,
  };
  const toolChoice = convertToolChoice(req.tool_choice, warnings);
  if (toolChoice !== undefined) value.toolChoice = toolChoice;
  if (req.parallel_tool_calls != null) value.parallelToolCalls = req.parallel_tool_calls;
  if (req.max_output_tokens != null) value.maxTokens = req.max_output_tokens;
  if (req.temperature != null) value.temperature = req.temperature;
  if (req.top_p != null) value.topP = req.top_p;
  if (effort) value.reasoning = effort === 'none' ? { enabled: false, effort } : { effort };
  return { value, warnings };
}
