/**
 * What the judge reads of a rollout: its capture's last answered call (the conversation the harness
 * sent, in canonical form, and the model's answer) as plain text, one block per message with its tool
 * calls, and the session's id. Long messages and long transcripts are cut (the task statement and the
 * end are kept: what the agent finally did is what the rubric usually asks about), and the cut is said.
 */
import { readCapture } from '../../capture/reader.ts';
import type { CanonicalMessage, CanonicalResponse, ToolCall } from '../../protocols/canonical.ts';

/** a message longer than this shows its head and tail */
const MESSAGE_CHARS = 4000;
/** the transcript keeps its first message and as many of the last as fit */
const TRANSCRIPT_CHARS = 48_000;

export interface Transcript {
  /** the capture's session id (null when none was recorded) */
  session: string | null;
  /** the first user message's text ('' when none) */
  task: string;
  text: string;
}

function cut(text: string, max = MESSAGE_CHARS): string {
  if (text.length <= max) return text;
  const half = Math.floor(max / 2);
  return `${text.slice(0, half)}\n[... ${text.length - max} characters cut ...]\n${text.slice(-half)}`;
}

const calls = (list: ToolCall[]) =>
  list.map((c) => `\n-> tool call ${c.name}(${cut(c.arguments, 1500)})`).join('');

function render(message: CanonicalMessage): string {
  switch (message.role) {
    case 'system':
      return `[system]\n${cut(message.content)}`;
    case 'user':
      return `[user]\n${cut(message.content.map((p) => (p.type === 'text' ? p.text : '[image]')).join('\n'))}`;
    case 'assistant':
      return `[assistant]\n${cut(message.content)}${calls(message.toolCalls ?? [])}`;
    case 'tool':
      return `[tool ${message.name ?? message.toolCallId}${message.isError ? ' (error)' : ''}]\n${cut(message.content)}`;
    default:
      return message satisfies never;
  }
}

/** The text of the first user message (the task as the harness put it). */
function taskOf(messages: CanonicalMessage[]): string {
  const user = messages.find((m) => m.role === 'user');
  return user ? user.content.map((p) => (p.type === 'text' ? p.text : '')).join('\n') : '';
}

/** Reads a rollout's capture for the judge; a missing capture or one without an answer reads as empty. */
export async function readTranscript(capture: string | null): Promise<Transcript> {
  let session: string | null = null;
  let last: { messages: CanonicalMessage[]; answer: CanonicalResponse } | null = null;
  if (capture) {
    for await (const { record } of readCapture(capture, { skipInvalid: true, onInvalid: () => {} })) {
      if (record.type === 'session') session = record.id;
      if (record.type !== 'call') continue;
      const request = record.canonical_request as { messages?: CanonicalMessage[] } | null;
      const answer = record.canonical_response as CanonicalResponse | null | undefined;
      if (request && Array.isArray(request.messages) && answer) last = { messages: request.messages, answer };
    }
  }
  if (!last) return { session, task: '', text: '(the rollout recorded no answered model call)' };
  const blocks = last.messages.map(render);
  blocks.push(`[assistant, final answer]\n${cut(last.answer.content)}${calls(last.answer.toolCalls ?? [])}`);
  // the first block (the system prompt or the task) and the last ones that fit
  const kept: string[] = [];
  let size = blocks[0]!.length;
  for (let i = blocks.length - 1; i > 0 && size + blocks[i]!.length <= TRANSCRIPT_CHARS; i--) {
    kept.unshift(blocks[i]!);
    size += blocks[i]!.length;
  }
  const dropped = blocks.length - 1 - kept.length;
  const text = [
    blocks[0]!,
    ...(dropped > 0 ? [`[... ${dropped} earlier messages cut ...]`] : []),
    ...kept,
  ].join('\n\n');
  return { session, task: taskOf(last.messages), text };
}
