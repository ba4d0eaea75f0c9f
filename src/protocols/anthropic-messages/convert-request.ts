/** Anthropic Messages request (Claude Code, Pi) -> canonical request. */

import { issuePath } from '../../util/zod.ts';
import type {
  AssistantMessage,
  CanonicalMessage,
  CanonicalRequest,
  Converted,
  ToolMessage,
  UserPart,
} from '../canonical.ts';
import { ProtocolError } from '../errors.ts';
import { parseOrThrow } from '../validate.ts';
import { convertToolChoice, convertTools } from './convert-tools.ts';
import {
  imageBlockSchema,
  messageSchema,
  requestSchema,
  textBlockSchema,
  thinkingBlockSchema,
  toolResultBlockSchema,
  toolUseBlockSchema,
} from './messages-api.ts';

/**
 * Claude Code's first system block is `x-anthropic-billing-header: cc_version=2.1.197.c40; ...`: a
 * per-version string that would change the prompt (and break prefix caching) on every upgrade. Dropped.
 */
const BILLING_HEADER = 'x-anthropic-billing-header:';

type Block = { type: string } & Record<string, unknown>;
type Path = PropertyKey[];

function systemText(system: string | { text: string }[], warnings: string[]): string {
  if (typeof system === 'string') return system;
  const kept = system.filter((b) => {
    if (!b.text.startsWith(BILLING_HEADER)) return true;
    warnings.push(
      'dropped system block x-anthropic-billing-header (per-version string, breaks prompt caching)',
    );
    return false;
  });
  return kept.map((b) => b.text).join('\n\n');
}

function userMessage(blocks: Block[], path: Path, out: CanonicalMessage[], warnings: string[]): void {
  const parts: UserPart[] = [];
  const results: ToolMessage[] = [];
  blocks.forEach((block, j) => {
    const at = [...path, 'content', j];
    if (block.type === 'text')
      parts.push({ type: 'text', text: parseOrThrow(textBlockSchema, block, at).text });
    else if (block.type === 'image') {
      const { source } = parseOrThrow(imageBlockSchema, block, at);
      parts.push({
        type: 'image',
        url: source.type === 'url' ? source.url : `data:${source.media_type};base64,${source.data}`,
      });
    } else if (block.type === 'tool_result') {
      const r = parseOrThrow(toolResultBlockSchema, block, at);
      const content = r.content ?? '';
      const texts =
        typeof content === 'string'
          ? [content]
          : content.flatMap((c) => (typeof c.text === 'string' ? [c.text] : []));
      if (typeof content !== 'string' && texts.length < content.length) {
        warnings.push(`${issuePath(at)}: dropped non-text tool_result content`);
      }
      results.push({
        role: 'tool',
        toolCallId: r.tool_use_id,
        content: texts.join('\n'),
        ...(r.is_error ? { isError: true } : {}),
      });
    } else warnings.push(`${issuePath(at)}: dropped content block of type ${block.type}`);
  });
  // tool results answer the previous assistant turn, so they come before any text the user added
  out.push(...results);
  if (parts.length > 0 || results.length === 0) out.push({ role: 'user', content: parts });
}

function assistantMessage(blocks: Block[], path: Path, warnings: string[]): AssistantMessage {
  const m: AssistantMessage = { role: 'assistant', content: '', toolCalls: [] };
  blocks.forEach((block, j) => {
    const at = [...path, 'content', j];
    if (block.type === 'text') m.content += parseOrThrow(textBlockSchema, block, at).text;
    else if (block.type === 'thinking') {
      const t = parseOrThrow(thinkingBlockSchema, block, at);
      if (t.thinking) m.reasoning = m.reasoning ? `${m.reasoning}\n\n${t.thinking}` : t.thinking;
      if (t.signature) m.reasoningSignature = t.signature;
    } else if (block.type === 'tool_use') {
      const u = parseOrThrow(toolUseBlockSchema, block, at);
      m.toolCalls.push({ id: u.id, name: u.name, arguments: JSON.stringify(u.input ?? {}) });
    } else warnings.push(`${issuePath(at)}: dropped content block of type ${block.type}`);
  });
  return m;
}

function convertMessages(raw: unknown[], warnings: string[]): CanonicalMessage[] {
  const out: CanonicalMessage[] = [];
  const names = new Map<string, string>();
  raw.forEach((item, i) => {
    const path = ['messages', i];
    const m = parseOrThrow(messageSchema, item, path);
    const blocks: Block[] = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
    if (m.role === 'system') {
      const texts = blocks.map((b, j) => parseOrThrow(textBlockSchema, b, [...path, 'content', j]));
      out.push({ role: 'system', content: texts.map((b) => b.text).join('\n\n') });
    } else if (m.role === 'assistant') {
      const a = assistantMessage(blocks, path, warnings);
      for (const call of a.toolCalls) names.set(call.id, call.name);
      out.push(a);
    } else {
      const start = out.length;
      userMessage(blocks, path, out, warnings);
      for (const msg of out.slice(start)) {
        const name = msg.role === 'tool' ? names.get(msg.toolCallId) : undefined;
        if (msg.role === 'tool' && name) msg.name = name;
      }
    }
  });
  return out;
}

function convert(body: unknown, requireMaxTokens: boolean): Converted<CanonicalRequest> {
  const req = parseOrThrow(requestSchema, body);
  if (requireMaxTokens && req.max_tokens == null) throw new ProtocolError('max_tokens: expected number');
  const warnings: string[] = [];
  const messages = convertMessages(req.messages, warnings);
  const system = req.system == null ? '' : systemText(req.system, warnings);
  if (system) messages.unshift({ role: 'system', content: system });
  const value: CanonicalRequest = {
    model: req.model,
    messages,
    tools: convertTools(req.tools ?? [], warnings),
    stream: req.stream ?? false,
  };
  const toolChoice = convertToolChoice(req.tool_choice);
  if (toolChoice !== undefined) value.toolChoice = toolChoice;
  if (req.tool_choice?.disable_parallel_tool_use) value.parallelToolCalls = false;
  if (req.max_tokens != null) value.maxTokens = req.max_tokens;
  if (req.temperature != null) value.temperature = req.temperature;
  if (req.top_p != null) value.topP = req.top_p;
  if (req.stop_sequences?.length) value.stop = req.stop_sequences;
  const effort = req.output_config?.effort ?? undefined;
  if (req.thinking || effort) {
    value.reasoning = {
      ...(req.thinking ? { enabled: req.thinking.type !== 'disabled' } : {}),
      ...(effort ? { effort } : {}),
    };
  }
  return { value, warnings };
}

export function parseRequest(body: unknown): Converted<CanonicalRequest> {
  return convert(body, true);
}

/** `/v1/messages/count_tokens`: the same body without max_tokens. */
export function parseCountTokensRequest(body: unknown): Converted<CanonicalRequest> {
  return convert(body, false);
}

export function renderCountTokens(inputTokens: number): { input_tokens: number } {
  return { input_tokens: inputTokens };
}
