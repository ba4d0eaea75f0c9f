/** Chat Completions request (from a harness) -> canonical request. */
import type {
  CanonicalMessage,
  CanonicalRequest,
  CanonicalTool,
  Converted,
  ToolChoice,
  UserPart,
} from '../canonical.ts';
import { invalidBody } from '../errors.ts';
import { type ChatRequest, requestSchema } from './chat-api.ts';

type Content = ChatRequest['messages'][number]['content'];

function partsOf(content: Content, warnings: string[], where: string): UserPart[] {
  if (content === null || content === undefined) return [];
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  const parts: UserPart[] = [];
  for (const part of content) {
    if (part.type === 'text' && typeof part.text === 'string') parts.push({ type: 'text', text: part.text });
    else if (part.type === 'image_url') {
      const image = (part as { image_url: string | { url: string } }).image_url;
      parts.push({ type: 'image', url: typeof image === 'string' ? image : image.url });
    } else warnings.push(`${where}: dropped content part of type ${part.type}`);
  }
  return parts;
}

function textOf(content: Content, warnings: string[], where: string): string {
  return partsOf(content, warnings, where)
    .map((p) => (p.type === 'text' ? p.text : ''))
    .join('');
}

export function parseRequest(body: unknown): Converted<CanonicalRequest> {
  const parsed = requestSchema.safeParse(body);
  if (!parsed.success) throw invalidBody(parsed.error);
  const req = parsed.data;
  const warnings: string[] = [];
  const messages: CanonicalMessage[] = req.messages.map((m, i): CanonicalMessage => {
    const where = `messages[${i}]`;
    switch (m.role) {
      case 'system':
      case 'developer':
        return { role: 'system', content: textOf(m.content, warnings, where) };
      case 'user':
        return { role: 'user', content: partsOf(m.content, warnings, where) };
      case 'assistant': {
        const reasoning = m.reasoning_content ?? m.reasoning ?? undefined;
        return {
          role: 'assistant',
          content: textOf(m.content, warnings, where),
          ...(reasoning ? { reasoning } : {}),
          toolCalls: (m.tool_calls ?? []).map((c) => ({
            id: c.id,
            name: c.function.name,
            arguments: c.function.arguments ?? '',
          })),
        };
      }
      default:
        return {
          role: 'tool',
          toolCallId: m.tool_call_id ?? m.name ?? '',
          ...(m.name ? { name: m.name } : {}),
          content: textOf(m.content, warnings, where),
        };
    }
  });
  const tools: CanonicalTool[] = [];
  for (const [i, tool] of (req.tools ?? []).entries()) {
    if (tool.type !== 'function' || !tool.function) {
      warnings.push(`tools[${i}]: dropped tool type ${tool.type}`);
      continue;
    }
    tools.push({
      name: tool.function.name,
      description: tool.function.description ?? '',
      parameters: tool.function.parameters ?? { type: 'object', properties: {} },
    });
  }
  let toolChoice: ToolChoice | undefined;
  if (typeof req.tool_choice === 'string') toolChoice = req.tool_choice;
  else if (req.tool_choice) toolChoice = { name: req.tool_choice.function.name };
  const maxTokens = req.max_completion_tokens ?? req.max_tokens ?? undefined;
  const value: CanonicalRequest = {
    model: req.model,
    messages,
    tools,
    stream: req.stream ?? false,
    ...(toolChoice ? { toolChoice } : {}),
    ...(req.parallel_tool_calls != null ? { parallelToolCalls: req.parallel_tool_calls } : {}),
    ...(maxTokens ? { maxTokens } : {}),
    ...(req.temperature != null ? { temperature: req.temperature } : {}),
    ...(req.top_p != null ? { topP: req.top_p } : {}),
    ...(req.stop != null ? { stop: typeof req.stop === 'string' ? [req.stop] : req.stop } : {}),
    ...(req.reasoning_effort ? { reasoning: { effort: req.reasoning_effort } } : {}),
  };
  return { value, warnings };
}

/** Whether the harness asked for the trailing usage chunk. */
export function wantsUsage(body: unknown): boolean {
  const options = (body as { stream_options?: { include_usage?: unknown } } | null)?.stream_options;
  return options?.include_usage === true;
}
