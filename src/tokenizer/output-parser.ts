/**
 * Incremental parser of sampled text into reasoning, content and tool calls, for the Qwen family:
 * `<think>...</think>` reasoning, Qwen3 (Hermes-style) `<tool_call>{"name", "arguments"}</tool_call>`
 * and Qwen3-Coder `<tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>`.
 * The body format is detected per call. Text that could be the start of a tag is held back until
 * it is known not to be one. A call that does not parse (bad JSON, no name, no closing tag when the
 * stream ends) is passed on as plain text and reported in `errors`: never dropped, never a throw.
 */
import type { CanonicalTool } from '../protocols/canonical.ts';

export type ParsedEvent =
  | { type: 'reasoning'; text: string }
  | { type: 'text'; text: string }
  | { type: 'tool-call'; name: string; arguments: string; format: 'json' | 'xml' };

export interface ToolParseError {
  /** position among the `<tool_call>` blocks of this completion (0-based) */
  block: number;
  reason: string;
  text: string;
}

const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';
const CALL_OPEN = '<tool_call>';
const CALL_CLOSE = '</tool_call>';

type Mode = 'content' | 'reasoning' | 'tool';

export interface OutputParserOptions {
  /** the prompt ended inside an open `<think>` (templates that open it in the generation prompt) */
  startInReasoning?: boolean;
  tools?: CanonicalTool[];
}

export class OutputParser {
  private mode: Mode;
  private buffer = '';
  /** `<think>` is only recognised before any content */
  private sawContent = false;
  private sawThink = false;
  /** whitespace held back in content mode: dropped before/after tool calls and at the end */
  private pendingSpace = '';
  private reasoningStarted = false;
  private pendingReasoningNewlines = '';
  private blocks = 0;
  private readonly tools: Map<string, CanonicalTool>;
  readonly errors: ToolParseError[] = [];
  content = '';
  reasoning = '';
  readonly toolCalls: { name: string; arguments: string }[] = [];

  constructor(options: OutputParserOptions = {}) {
    this.mode = options.startInReasoning ? 'reasoning' : 'content';
    if (options.startInReasoning) this.sawThink = true;
    this.tools = new Map((options.tools ?? []).map((t) => [t.name, t]));
  }

  push(text: string): ParsedEvent[] {
    this.buffer += text;
    const events: ParsedEvent[] = [];
    this.drain(events, false);
    return events;
  }

  end(): ParsedEvent[] {
    const events: ParsedEvent[] = [];
    this.drain(events, true);
    if (this.mode === 'tool') {
      this.fail(CALL_OPEN + this.buffer, 'unclosed <tool_call> at the end of the completion', events);
      this.buffer = '';
      this.mode = 'content';
    } else if (this.buffer) {
      if (this.mode === 'reasoning') this.emitReasoning(this.buffer, events, true);
      else this.emitContent(this.buffer, events);
      this.buffer = '';
    }
    return events;
  }

  private drain(events: ParsedEvent[], final: boolean): void {
    for (;;) {
      if (this.mode === 'tool') {
        const close = this.buffer.indexOf(CALL_CLOSE);
        if (close === -1) return;
        const body = this.buffer.slice(0, close);
        this.buffer = this.buffer.slice(close + CALL_CLOSE.length);
        this.mode = 'content';
        this.finishCall(body, events);
        continue;
      }
      const tags = this.mode === 'reasoning' ? [THINK_CLOSE] : this.contentTags();
      let at = -1;
      let tag = '';
      for (const candidate of tags) {
        const i = this.buffer.indexOf(candidate);
        if (i !== -1 && (at === -1 || i < at)) {
          at = i;
          tag = candidate;
        }
      }
      if (at === -1) {
        const keep = final ? 0 : heldBack(this.buffer, tags);
        const out = this.buffer.slice(0, this.buffer.length - keep);
        this.buffer = this.buffer.slice(this.buffer.length - keep);
        if (out) {
          if (this.mode === 'reasoning') this.emitReasoning(out, events, false);
          else this.emitContent(out, events);
        }
        return;
      }
      const before = this.buffer.slice(0, at);
      this.buffer = this.buffer.slice(at + tag.length);
      if (this.mode === 'reasoning') {
        this.emitReasoning(before, events, true);
        this.mode = 'content';
        this.pendingSpace = '';
        this.sawContent = false;
        this.afterThink = true;
      } else {
        if (tag === THINK_OPEN && before.trim()) {
          // <think> after content is text
          this.emitContent(before + tag, events);
          continue;
        }
        if (before) this.emitContent(before, events);
        if (tag === THINK_OPEN) {
          this.sawThink = true;
          this.mode = 'reasoning';
        } else {
          this.pendingSpace = '';
          this.mode = 'tool';
        }
      }
    }
  }

  private afterThink = false;

  private contentTags(): string[] {
    return !this.sawThink && !this.sawContent ? [CALL_OPEN, THINK_OPEN] : [CALL_OPEN];
  }

  private emitContent(text: string, events: ParsedEvent[]): void {
    let out = this.pendingSpace + text;
    if (!this.sawContent && (this.afterThink || this.content === '')) out = out.replace(/^\s+/, '');
    const trimmed = out.replace(/\s+$/, '');
    this.pendingSpace = out.slice(trimmed.length);
    if (!trimmed) return;
    this.sawContent = true;
    this.content += trimmed;
    events.push({ type: 'text', text: trimmed });
  }

  private emitReasoning(text: string, events: ParsedEvent[], closing: boolean): void {
    let out = this.pendingReasoningNewlines + text;
    this.pendingReasoningNewlines = '';
    if (!this.reasoningStarted) out = out.replace(/^\n+/, '');
    if (closing) out = out.replace(/\n+$/, '');
    else {
      const stripped = out.replace(/\n+$/, '');
      this.pendingReasoningNewlines = out.slice(stripped.length);
      out = stripped;
    }
    if (!out) return;
    this.reasoningStarted = true;
    this.reasoning += out;
    events.push({ type: 'reasoning', text: out });
  }

  private finishCall(body: string, events: ParsedEvent[]): void {
    const block = this.blocks;
    const parsed = body.trimStart().startsWith('<function=') ? this.parseXml(body) : parseJsonCall(body);
    if ('error' in parsed) {
      this.fail(CALL_OPEN + body + CALL_CLOSE, parsed.error, events, block);
      return;
    }
    this.blocks++;
    this.toolCalls.push({ name: parsed.name, arguments: parsed.arguments });
    events.push({ type: 'tool-call', ...parsed });
  }

  private fail(raw: string, reason: string, events: ParsedEvent[], block = this.blocks): void {
    if (block === this.blocks) this.blocks++;
    this.errors.push({ block, reason, text: raw });
    // the raw text becomes content, so what the model wrote reaches the harness
    const out = this.pendingSpace + raw;
    this.pendingSpace = '';
    this.sawContent = true;
    this.content += out;
    events.push({ type: 'text', text: out });
  }

  private parseXml(body: string): { name: string; arguments: string; format: 'xml' } | { error: string } {
    const fn = /^\s*<function=([^>\n]+)>([\s\S]*?)<\/function>\s*$/.exec(body);
    if (!fn) return { error: 'malformed <function=...> block (no closing </function> or text outside it)' };
    const name = fn[1]!.trim();
    const inner = fn[2]!;
    const tool = this.tools.get(name);
    const properties = (tool?.parameters as { properties?: Record<string, { type?: unknown }> } | undefined)
      ?.properties;
    const args: Record<string, unknown> = {};
    const re = /<parameter=([^>\n]+)>([\s\S]*?)<\/parameter>/g;
    let last = 0;
    for (let m = re.exec(inner); m !== null; m = re.exec(inner)) {
      if (inner.slice(last, m.index).trim()) return { error: 'text between <parameter> blocks' };
      last = m.index + m[0].length;
      const key = m[1]!.trim();
      let value = m[2]!;
      if (value.startsWith('\n')) value = value.slice(1);
      if (value.endsWith('\n')) value = value.slice(0, -1);
      args[key] = convertParameter(value, properties?.[key]?.type);
    }
    if (inner.slice(last).trim()) return { error: 'unclosed or malformed <parameter> block' };
    return { name, arguments: JSON.stringify(args), format: 'xml' };
  }
}

function parseJsonCall(
  body: string,
): { name: string; arguments: string; format: 'json' } | { error: string } {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (error) {
    return { error: `tool call is not valid JSON: ${(error as Error).message}` };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { error: 'tool call JSON is not an object' };
  }
  const record = value as Record<string, unknown>;
  if (typeof record.name !== 'string' || !record.name) return { error: 'tool call has no "name" string' };
  const args = record.arguments ?? record.parameters ?? {};
  if (typeof args === 'string') {
    try {
      const inner = JSON.parse(args);
      if (inner !== null && typeof inner === 'object' && !Array.isArray(inner)) {
        return { name: record.name, arguments: args, format: 'json' };
      }
    } catch {
      // fall through
    }
    return { error: 'tool call "arguments" is a string that is not a JSON object' };
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    return { error: 'tool call "arguments" is not an object' };
  }
  return { name: record.name, arguments: JSON.stringify(args), format: 'json' };
}

/** Qwen3-Coder parameters are raw text; the tool's JSON schema says what type they were meant as. */
function convertParameter(value: string, type: unknown): unknown {
  const types = Array.isArray(type) ? type : [type];
  const trimmed = value.trim();
  if (types.includes('integer') || types.includes('number')) {
    const n = Number(trimmed);
    if (trimmed !== '' && Number.isFinite(n)) return n;
  }
  if (types.includes('boolean')) {
    if (trimmed === 'true' || trimmed === 'True') return true;
    if (trimmed === 'false' || trimmed === 'False') return false;
  }
  if (types.includes('object') || types.includes('array') || types.includes('null')) {
    try {
      return JSON.parse(trimmed);
    } catch {
      return value;
    }
  }
  return value;
}

/** length of the longest suffix of `text` that is a proper prefix of one of the tags */
function heldBack(text: string, tags: string[]): number {
  let keep = 0;
  for (const tag of tags) {
    for (let n = Math.min(tag.length - 1, text.length); n > keep; n--) {
      if (text.endsWith(tag.slice(0, n))) {
        keep = n;
        break;
      }
    }
  }
  return keep;
}
