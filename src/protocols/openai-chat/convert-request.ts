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
  let req: ChatRequest;
  if (isPlainRequest(body)) req = body;
  else {
    // the full schema (its error names the field) for what the fast check does not recognise
    const parsed = requestSchema.safeParse(body);
    if (!parsed.success) throw invalidBody(parsed.error);
    req = parsed.data;
  }
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

const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const nullish = (v: unknown) => v === undefined || v === null;
const optStr = (v: unknown) => nullish(v) || typeof v === 'string';
const optBool = (v: unknown) => nullish(v) || typeof v === 'boolean';
const optNum = (v: unknown) => nullish(v) || (typeof v === 'number' && Number.isFinite(v));
const optCount = (v: unknown) => nullish(v) || (Number.isInteger(v) && (v as number) > 0);
const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);

/** Content as strings or text parts only (image and other parts go through the schema). */
function plainContent(content: unknown): boolean {
  if (nullish(content) || typeof content === 'string') return true;
  if (!Array.isArray(content)) return false;
  for (const part of content) {
    if (!isObj(part) || part.type !== 'text' || typeof part.text !== 'string') return false;
  }
  return true;
}

function plainMessage(m: unknown): boolean {
  if (!isObj(m) || typeof m.role !== 'string' || !ROLES.has(m.role) || !plainContent(m.content)) return false;
  if (!optStr(m.name) || !optStr(m.tool_call_id) || !optStr(m.reasoning_content) || !optStr(m.reasoning))
    return false;
  const calls = m.tool_calls;
  if (nullish(calls)) return true;
  if (!Array.isArray(calls)) return false;
  for (const c of calls) {
    if (!isObj(c) || typeof c.id !== 'string' || !(c.type === undefined || typeof c.type === 'string'))
      return false;
    const f = c.function;
    if (!isObj(f) || typeof f.name !== 'string' || !optStr(f.arguments)) return false;
  }
  return true;
}

function plainTool(t: unknown): boolean {
  if (!isObj(t) || typeof t.type !== 'string') return false;
  const f = t.function;
  if (f === undefined) return true;
  return (
    isObj(f) &&
    typeof f.name === 'string' &&
    optStr(f.description) &&
    (nullish(f.parameters) || isObj(f.parameters))
  );
}

/**
 * The hot path: a hand-written check of the request as requestSchema reads it, for the common request
 * (text messages, tool calls, function tools). Anything else goes through the zod schema, which accepts
 * the same shapes (and more); this saves its cost (about 4 us a message, every call resending the whole
 * conversation). The converter reads the body as it is: it never changes it.
 */
export function isPlainRequest(body: unknown): body is ChatRequest {
  if (!isObj(body) || typeof body.model !== 'string' || !Array.isArray(body.messages)) return false;
  for (const m of body.messages) if (!plainMessage(m)) return false;
  const { tools, tool_choice: choice, stop, stream_options: options } = body;
  if (!nullish(tools)) {
    if (!Array.isArray(tools)) return false;
    for (const t of tools) if (!plainTool(t)) return false;
  }
  if (
    !nullish(choice) &&
    !(choice === 'auto' || choice === 'none' || choice === 'required') &&
    !(isObj(choice) && isObj(choice.function) && typeof choice.function.name === 'string')
  )
    return false;
  if (
    !nullish(stop) &&
    typeof stop !== 'string' &&
    !(Array.isArray(stop) && stop.every((s) => typeof s === 'string'))
  )
    return false;
  if (!nullish(options) && !(isObj(options) && optBool(options.include_usage))) return false;
  return (
    optBool(body.parallel_tool_calls) &&
    optCount(body.max_tokens) &&
    optCount(body.max_completion_tokens) &&
    optNum(body.temperature) &&
    optNum(body.top_p) &&
    optBool(body.stream) &&
    optStr(body.reasoning_effort)
  );
}
