/**
 * Incremental chat-template rendering for ChatML templates (Qwen family).
 *
 * In an agent session each call resends the previous request's messages P plus a few new ones N
 * (the sampled assistant turn and its tool results). Rendering the whole template every call is
 * O(context); here only N is rendered, and the rendering of P is taken from the previous call.
 *
 * That is exact when the rendering of P does not depend on what follows it, and the rendering of N
 * depends on P only through facts a short stand-in context reproduces. For Qwen3's template (and
 * ChatML templates like it) the rendering of a message depends on later messages in two ways only:
 * the think-dropping rule (assistant turns before the last user query lose their reasoning; one that
 * is `loop.last` always gets a think block) and tool-result grouping (consecutive tool messages share
 * one `<|im_start|>user` block, closed after the last one). So incremental rendering is used only when
 *   - P's messages, the tools and the template kwargs are unchanged, P holds a user query, P does not
 *     end with an assistant message, and N holds only assistant and tool messages (a new user query
 *     moves `last_query_index` and can rewrite P: full render), and N does not start with a tool
 *     message when P ends with one (it would join P's last block: full render);
 * then N is rendered behind a stand-in context of one user message: `render([anchor, ...N])` minus
 * `render([anchor])` (the anchor is the last user query for N, as P's query is in the full list; N's
 * first message follows a non-tool message in both), and must start with `<|im_start|>`.
 * Whether a template behaves so is checked once per tokenizer by rendering probe conversations both
 * ways (full and incremental, at every split point these rules allow); any difference turns
 * incremental rendering off for that tokenizer. When unsure, polar renders in full.
 */
import type { CanonicalMessage } from '../protocols/canonical.ts';
import type { ChatTokenizer, TemplateMessage, TemplateTool } from './chat-tokenizer.ts';
import { toTemplateMessages } from './messages.ts';

const IM_START = '<|im_start|>';
const ANCHOR: TemplateMessage = { role: 'user', content: 'polar: rendering anchor' };

/** true when the first message of `messages` renders as the user query the template keys on */
function isQuery(message: CanonicalMessage): boolean {
  if (message.role !== 'user') return false;
  const first = message.content.find((p) => p.type === 'text');
  return !(first && first.type === 'text' && first.text.startsWith('<tool_response>'));
}

/** whether messages[from..] may be rendered on their own after messages[..from) (see the file comment) */
export function canRenderSuffix(messages: CanonicalMessage[], from: number): boolean {
  if (from <= 0 || from > messages.length) return false;
  const last = messages[from - 1]!;
  if (last.role === 'assistant') return false;
  let query = false;
  for (let i = 0; i < from; i++) {
    if (isQuery(messages[i]!)) {
      query = true;
      break;
    }
  }
  if (!query) return false;
  for (let i = from; i < messages.length; i++) {
    const role = messages[i]!.role;
    if (role !== 'assistant' && role !== 'tool') return false;
  }
  if (last.role === 'tool' && messages[from]?.role === 'tool') return false;
  return true;
}

const anchors = new WeakMap<ChatTokenizer, Map<string, string>>();

/**
 * The text the template renders for `suffix` (template messages) behind the previous messages,
 * generation prompt included; null when the template does not render it as a separable tail.
 */
export function renderSuffix(
  tokenizer: ChatTokenizer,
  suffix: TemplateMessage[],
  tools: TemplateTool[],
  kwargs: Record<string, unknown>,
  key: string,
): string | null {
  let byKey = anchors.get(tokenizer);
  if (!byKey) {
    byKey = new Map();
    anchors.set(tokenizer, byKey);
  }
  let head = byKey.get(key);
  if (head === undefined) {
    head = tokenizer.render([ANCHOR], tools, kwargs, false);
    if (byKey.size > 64) byKey.clear();
    byKey.set(key, head);
  }
  const whole = tokenizer.render([ANCHOR, ...suffix], tools, kwargs);
  if (!whole.startsWith(head)) return null;
  const tail = whole.slice(head.length);
  return tail.startsWith(IM_START) ? tail : null;
}

/** the offset of the generation prompt's block: the last `<|im_start|>` */
export function generationStart(text: string): number {
  return text.lastIndexOf(IM_START);
}

const verdicts = new WeakMap<ChatTokenizer, boolean>();

const probeTools: TemplateTool[] = [
  {
    type: 'function',
    function: {
      name: 'bash',
      description: 'Run a command',
      parameters: { type: 'object', properties: { cmd: { type: 'string' } } },
    },
  },
];

function probeConversations(): CanonicalMessage[][] {
  const user = (text: string): CanonicalMessage => ({ role: 'user', content: [{ type: 'text', text }] });
  const call = (id: string, cmd: string) => ({ id, name: 'bash', arguments: JSON.stringify({ cmd }) });
  const tool = (id: string, content: string): CanonicalMessage => ({ role: 'tool', toolCallId: id, content });
  const agent: CanonicalMessage[] = [
    { role: 'system', content: 'You are a coding agent.' },
    user('Fix the test.'),
    { role: 'assistant', content: '', reasoning: 'Look first.', toolCalls: [call('c1', 'ls')] },
    tool('c1', 'a.ts\nb.ts'),
    {
      role: 'assistant',
      content: 'Reading both.',
      reasoning: 'Two files.',
      toolCalls: [call('c2', 'cat a.ts'), call('c3', 'cat b.ts')],
    },
    tool('c2', 'export const a = 1;'),
    tool('c3', '\n<tool_response>x</tool_response>\n'),
    {
      role: 'assistant',
      content: '<think>\ninline\n</think>\n\nNo reasoning field.',
      toolCalls: [call('c4', 'pwd')],
    },
    tool('c4', '/w'),
    { role: 'assistant', content: 'Plain text turn.', toolCalls: [] },
    user('<tool_response>\nwrapped\n</tool_response>'),
    { role: 'assistant', content: '', toolCalls: [call('c5', 'true')] },
    tool('c5', ''),
    { role: 'assistant', content: 'Done.', reasoning: 'All good.', toolCalls: [] },
    user('Thanks. Again?'),
    { role: 'assistant', content: '', reasoning: 'Once more.', toolCalls: [call('c6', 'ls')] },
    tool('c6', 'a.ts'),
  ];
  const noSystem = agent.slice(1);
  return [agent, noSystem];
}

/**
 * Checks once per tokenizer that incremental rendering gives the full rendering, byte for byte, on
 * probe conversations at every split point canRenderSuffix allows, with and without tools and with
 * thinking on and off.
 */
export function incrementalRenderingWorks(tokenizer: ChatTokenizer): boolean {
  const known = verdicts.get(tokenizer);
  if (known !== undefined) return known;
  let ok = tokenizer.chatTemplate !== null;
  try {
    for (const conversation of ok ? probeConversations() : []) {
      for (const tools of [[], probeTools]) {
        for (const kwargs of [{}, { enable_thinking: false }, { enable_thinking: true }]) {
          const key = `probe:${tools.length}:${JSON.stringify(kwargs)}`;
          const all = toTemplateMessages(conversation);
          for (let end = 2; end <= conversation.length && ok; end++) {
            const full = tokenizer.render(all.slice(0, end), tools, kwargs);
            for (let from = 1; from <= end && ok; from++) {
              if (!canRenderSuffix(conversation.slice(0, end), from)) continue;
              const previous = tokenizer.render(all.slice(0, from), tools, kwargs);
              const tail = renderSuffix(tokenizer, all.slice(from, end), tools, kwargs, key);
              ok = tail !== null && previous.slice(0, generationStart(previous)) + tail === full;
            }
          }
          if (!ok) break;
        }
        if (!ok) break;
      }
      if (!ok) break;
    }
  } catch {
    ok = false;
  }
  verdicts.set(tokenizer, ok);
  return ok;
}
