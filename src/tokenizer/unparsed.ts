/**
 * Tool calls the server did not parse: a completion whose text holds a tool call in the model's own
 * format (Qwen3 / Hermes `<tool_call>{"name", "arguments"}</tool_call>`, Qwen3-Coder
 * `<tool_call><function=...>`: what OutputParser reads) while the response carries no tool call. The
 * harness then sees prose, the turn ends, and a multi-turn rollout silently becomes a single-turn one
 * (vLLM without `--enable-auto-tool-choice` / `--tool-call-parser`, a parser that does not match the
 * model). Checked on every call record whatever the backend (src/capture/call-record.ts).
 */
import type { CanonicalResponse } from '../protocols/canonical.ts';
import { OutputParser } from './output-parser.ts';

/** Whether the response's text holds a tool call (well-formed or not) that it does not return as one. */
export function hasUnparsedToolCall(
  response: Pick<CanonicalResponse, 'content' | 'toolCalls'> | null,
): boolean {
  if (!response || response.toolCalls.length > 0 || !response.content.includes('<tool_call>')) return false;
  const parser = new OutputParser();
  parser.push(response.content);
  parser.end();
  return parser.toolCalls.length > 0 || parser.errors.length > 0;
}
