/**
 * Chat Completions stream (from an inference server) -> canonical events + token data. Stateful, never
 * throws: a chunk that fails validation becomes a warning, a stream that ends early is reported by end().
 */
import {
  type CanonicalResponse,
  emptyResponse,
  type StreamEvent,
  type TokenData,
  type ToolCall,
} from '../canonical.ts';
import { type ChatChunk, type ChatCompletion, chunkSchema, completionSchema } from './chat-api.ts';
import { fromChatFinishReason } from './map-finish-reason.ts';

export class ChatStreamParser {
  private started = false;
  private readonly response: CanonicalResponse;
  private readonly calls = new Map<number, ToolCall>();
  private finishRaw: string | null = null;
  private promptIds: number[] | null = null;
  private completionIds: number[] | null = null;
  private logprobs: number[] | null = null;
  readonly warnings: string[] = [];
  /** true once a finish_reason arrived */
  finished = false;

  constructor(id: string, model: string) {
    this.response = emptyResponse(id, model);
  }

  push(raw: unknown): StreamEvent[] {
    const events: StreamEvent[] = [];
    if (!this.started) {
      this.started = true;
      events.push({ type: 'start', id: this.response.id, model: this.response.model });
    }
    let chunk: ChatChunk;
    if (isPlainChunk(raw)) chunk = raw;
    else {
      // the full (permissive) schema only for chunks the fast check does not recognise
      const parsed = chunkSchema.safeParse(raw);
      if (!parsed.success) {
        this.warnings.push(
          `backend sent a chunk that is not a chat completion chunk: ${JSON.stringify(raw).slice(0, 200)}`,
        );
        return events;
      }
      chunk = parsed.data;
    }
    if (chunk.prompt_token_ids) this.promptIds = chunk.prompt_token_ids;
    if (chunk.usage) {
      this.response.usage = {
        promptTokens: chunk.usage.prompt_tokens,
        completionTokens: chunk.usage.completion_tokens,
      };
    }
    for (const choice of chunk.choices ?? []) {
      if ((choice.index ?? 0) !== 0) continue;
      if (choice.token_ids) {
        this.completionIds ??= [];
        this.completionIds.push(...choice.token_ids);
      }
      const lps = choice.logprobs?.content;
      if (lps) {
        this.logprobs ??= [];
        for (const lp of lps) this.logprobs.push(lp.logprob);
      }
      const delta = choice.delta;
      const reasoning = delta?.reasoning_content ?? delta?.reasoning;
      if (reasoning) {
        this.response.reasoning += reasoning;
        events.push({ type: 'reasoning-delta', text: reasoning });
      }
      if (delta?.content) {
        this.response.content += delta.content;
        events.push({ type: 'text-delta', text: delta.content });
      }
      for (const tc of delta?.tool_calls ?? []) {
        const index = tc.index ?? this.calls.size;
        let call = this.calls.get(index);
        if (!call) {
          call = { id: tc.id ?? `call_${index}`, name: tc.function?.name ?? '', arguments: '' };
          this.calls.set(index, call);
          events.push({ type: 'tool-call-start', index, id: call.id, name: call.name });
        }
        const args = tc.function?.arguments;
        if (args) {
          call.arguments += args;
          events.push({ type: 'tool-call-delta', index, arguments: args });
        }
      }
      if (choice.finish_reason) {
        this.finishRaw = choice.finish_reason;
        this.finished = true;
      }
    }
    return events;
  }

  /** Closes open tool calls and emits the finish event. */
  end(): { events: StreamEvent[]; response: CanonicalResponse; tokens: TokenData } {
    const events: StreamEvent[] = [];
    if (!this.started) events.push({ type: 'start', id: this.response.id, model: this.response.model });
    const indices = [...this.calls.keys()].sort((a, b) => a - b);
    for (const index of indices) events.push({ type: 'tool-call-end', index });
    this.response.toolCalls = indices.map((i) => this.calls.get(i)!);
    this.response.finishReason = fromChatFinishReason(this.finishRaw, this.response.toolCalls.length > 0);
    if (this.completionIds && this.response.usage.completionTokens === 0) {
      this.response.usage.completionTokens = this.completionIds.length;
    }
    if (this.promptIds && this.response.usage.promptTokens === 0) {
      this.response.usage.promptTokens = this.promptIds.length;
    }
    events.push({ type: 'finish', response: this.response });
    return {
      events,
      response: this.response,
      tokens: {
        promptTokenIds: this.promptIds,
        completionTokenIds: this.completionIds,
        completionLogprobs: this.logprobs,
      },
    };
  }
}

/** A whole (non-streaming) completion -> the same events a stream would give, plus token data. */
export function completionToEvents(
  raw: unknown,
  id: string,
  model: string,
): { events: StreamEvent[]; response: CanonicalResponse; tokens: TokenData; warnings: string[] } | null {
  const parsed = completionSchema.safeParse(raw);
  if (!parsed.success) return null;
  const c: ChatCompletion = parsed.data;
  const choice = c.choices[0];
  const response = emptyResponse(id, model);
  const events: StreamEvent[] = [{ type: 'start', id, model }];
  if (choice) {
    const reasoning = choice.message.reasoning_content ?? choice.message.reasoning ?? '';
    if (reasoning) {
      response.reasoning = reasoning;
      events.push({ type: 'reasoning-delta', text: reasoning });
    }
    if (choice.message.content) {
      response.content = choice.message.content;
      events.push({ type: 'text-delta', text: choice.message.content });
    }
    (choice.message.tool_calls ?? []).forEach((tc, index) => {
      const call: ToolCall = { id: tc.id, name: tc.function.name, arguments: tc.function.arguments ?? '' };
      response.toolCalls.push(call);
      events.push({ type: 'tool-call-start', index, id: call.id, name: call.name });
      if (call.arguments) events.push({ type: 'tool-call-delta', index, arguments: call.arguments });
      events.push({ type: 'tool-call-end', index });
    });
    response.finishReason = fromChatFinishReason(choice.finish_reason, response.toolCalls.length > 0);
  }
  const meta = choice?.meta_info?.output_token_logprobs ?? c.meta_info?.output_token_logprobs ?? null;
  const completionTokenIds = choice?.token_ids ?? (meta ? meta.map((e) => e[1]) : null);
  const completionLogprobs =
    choice?.logprobs?.content?.map((e) => e.logprob) ?? (meta ? meta.map((e) => e[0]) : null);
  const promptTokenIds = c.prompt_token_ids ?? choice?.prompt_token_ids ?? null;
  if (c.usage)
    response.usage = { promptTokens: c.usage.prompt_tokens, completionTokens: c.usage.completion_tokens };
  events.push({ type: 'finish', response });
  return {
    events,
    response,
    tokens: { promptTokenIds, completionTokenIds, completionLogprobs },
    warnings: [],
  };
}

const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const optStr = (v: unknown) => v === undefined || v === null || typeof v === 'string';
/** (a loop: `every(Number.isInteger)` took 270 us on a prompt's 30k ids, the loop 20 us) */
function optInts(v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (!Number.isInteger(v[i])) return false;
  return true;
}

/**
 * The hot path: a hand-written check of exactly the fields the parser reads, for the common chunk
 * (text, reasoning, token ids, logprobs, usage). Anything else goes through the zod schema, which
 * accepts the same shapes; this only saves its cost (about 20 us a chunk) on every streamed token.
 */
function isPlainChunk(raw: unknown): raw is ChatChunk {
  if (!isObj(raw) || !optInts(raw.prompt_token_ids)) return false;
  if (raw.usage !== undefined && raw.usage !== null) {
    if (
      !isObj(raw.usage) ||
      typeof raw.usage.prompt_tokens !== 'number' ||
      typeof raw.usage.completion_tokens !== 'number'
    )
      return false;
  }
  if (raw.choices === undefined || raw.choices === null) return true;
  if (!Array.isArray(raw.choices)) return false;
  for (const choice of raw.choices) {
    if (!isObj(choice) || !optInts(choice.token_ids) || !optStr(choice.finish_reason)) return false;
    if (choice.index !== undefined && choice.index !== null && !Number.isInteger(choice.index)) return false;
    const delta = choice.delta;
    if (delta !== undefined && delta !== null) {
      if (
        !isObj(delta) ||
        !optStr(delta.content) ||
        !optStr(delta.reasoning_content) ||
        !optStr(delta.reasoning)
      )
        return false;
      if (delta.tool_calls !== undefined && delta.tool_calls !== null) return false; // rare: full schema
    }
    const lp = choice.logprobs;
    if (lp !== undefined && lp !== null) {
      if (!isObj(lp)) return false;
      const content = lp.content;
      if (content !== undefined && content !== null) {
        if (!Array.isArray(content) || !content.every((e) => isObj(e) && typeof e.logprob === 'number'))
          return false;
      }
    }
  }
  return true;
}
