/** Anthropic `tools` / `tool_choice` -> canonical. Server tools (typed, e.g. web_search_20250305) are dropped. */
import type { CanonicalTool, ToolChoice } from '../canonical.ts';
import { parseOrThrow } from '../validate.ts';
import { type MessagesRequest, toolSchema } from './messages-api.ts';

export function convertTools(tools: readonly unknown[], warnings: string[]): CanonicalTool[] {
  const out: CanonicalTool[] = [];
  tools.forEach((raw, i) => {
    const tool = parseOrThrow(toolSchema, raw, ['tools', i]);
    if (tool.type && tool.type !== 'custom') {
      warnings.push(`dropped tool type ${tool.type}`);
      return;
    }
    out.push({
      name: tool.name,
      description: tool.description ?? '',
      parameters: tool.input_schema ?? { type: 'object', properties: {} },
    });
  });
  return out;
}

export function convertToolChoice(choice: MessagesRequest['tool_choice']): ToolChoice | undefined {
  switch (choice?.type) {
    case undefined:
      return undefined;
    case 'auto':
      return 'auto';
    case 'any':
      return 'required';
    case 'none':
      return 'none';
    case 'tool':
      return choice.name ? { name: choice.name } : 'required';
  }
}
