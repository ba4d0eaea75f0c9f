/**
 * Canonical chat form -> the message list a Hugging Face chat template expects
 * (`{role, content, reasoning_content?, tool_calls?: [{type, function: {name, arguments}}]}`).
 * Tool call arguments go in as parsed objects: Qwen3's template applies `tojson` to a mapping and
 * pastes a string as is.
 */
import type { CanonicalMessage, CanonicalTool } from '../protocols/canonical.ts';
import type { TemplateMessage, TemplateTool } from './chat-tokenizer.ts';

export function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export function toTemplateMessages(messages: CanonicalMessage[], warnings: string[] = []): TemplateMessage[] {
  return messages.map((message, index): TemplateMessage => {
    switch (message.role) {
      case 'system':
        return { role: 'system', content: message.content };
      case 'user': {
        const texts: string[] = [];
        for (const part of message.content) {
          if (part.type === 'text') texts.push(part.text);
          else warnings.push(`message ${index}: image input is not supported by the token backends; dropped`);
        }
        return { role: 'user', content: texts.join('\n') };
      }
      case 'assistant': {
        const out: TemplateMessage = { role: 'assistant', content: message.content };
        if (message.reasoning) out.reasoning_content = message.reasoning;
        if (message.toolCalls.length > 0) {
          out.tool_calls = message.toolCalls.map((call) => ({
            type: 'function',
            id: call.id,
            function: { name: call.name, arguments: parseArguments(call.arguments) },
          }));
        }
        return out;
      }
      case 'tool': {
        const out: TemplateMessage = {
          role: 'tool',
          content: message.content,
          tool_call_id: message.toolCallId,
        };
        if (message.name) out.name = message.name;
        return out;
      }
      default:
        throw new Error(`unknown message role ${(message as { role: string }).role}`);
    }
  });
}

export function toTemplateTools(tools: CanonicalTool[]): TemplateTool[] {
  return tools.map((tool) => ({
    type: 'function',
    function: { name: tool.name, description: tool.description, parameters: tool.parameters },
  }));
}

/** JSON text with object keys sorted, for comparing arguments regardless of key order and whitespace */
export function normalizeJson(text: string): string {
  try {
    return stableStringify(JSON.parse(text));
  } catch {
    return text.trim();
  }
}

export function stableStringify(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableStringify).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) =>
      a < b ? -1 : a > b ? 1 : 0,
    );
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableStringify(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
