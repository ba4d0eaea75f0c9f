/**
 * Side calls recognised by request shape, per harness (docs/harnesses.md lists them with the versions
 * checked). A side call (title, prompt suggestion, compaction, subagent, warm-up, memory extraction) is
 * recorded as `harness_meta.request_kind`; `polar build` gives it a trace of its own, never the root
 * chain (src/trajectory/merge.ts OWN_TRACE_KINDS). The texts matched are the harnesses' own prompts, read
 * from the published packages named at each rule; a rule never guesses from size or timing.
 */

/** The parts of a request a rule looks at, whatever the wire API (chat, Responses, Anthropic Messages). */
export interface RequestShape {
  /** system / developer text (Anthropic `system`, Responses `instructions` + developer items, chat system) */
  system: string;
  /** text of the last user message */
  lastUser: string;
  /** number of tools offered, or null when the request has no tools field */
  tools: number | null;
  /** number of messages / input items */
  messages: number;
}

function text(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content
      .map((p) => (typeof p === 'string' ? p : ((p as { text?: unknown })?.text ?? '')))
      .filter((t): t is string => typeof t === 'string')
      .join('\n');
  return '';
}

export function requestShape(body: unknown): RequestShape {
  const b = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
  const items = (Array.isArray(b.messages) ? b.messages : Array.isArray(b.input) ? b.input : []) as Array<{
    role?: string;
    content?: unknown;
  }>;
  const system = [text(b.system), typeof b.instructions === 'string' ? b.instructions : '']
    .concat(items.filter((m) => m?.role === 'system' || m?.role === 'developer').map((m) => text(m.content)))
    .filter(Boolean)
    .join('\n');
  const lastUser = [...items].reverse().find((m) => m?.role === 'user');
  return {
    system,
    lastUser: text(lastUser?.content),
    tools: Array.isArray(b.tools) ? b.tools.length : null,
    messages: items.length,
  };
}

export interface KindRule {
  kind: string;
  /** where the text was read: package@version and the symbol */
  source: string;
  test(shape: RequestShape): boolean;
}

/** The first rule that matches, or null (an ordinary turn). */
export function classify(rules: readonly KindRule[], body: unknown): string | null {
  const shape = requestShape(body);
  for (const rule of rules) if (rule.test(shape)) return rule.kind;
  return null;
}

const startsWith = (s: string, prefix: string) => s.trimStart().startsWith(prefix);

/** Claude Code (@anthropic-ai/claude-code 2.1.197 and 2.1.332, strings of bin/claude.exe). */
export const CLAUDE_RULES: readonly KindRule[] = [
  {
    kind: 'title',
    source: 'generateSessionTitle (querySource "generate_session_title")',
    test: (s) => s.system.includes('Generate a concise, sentence-case title'),
  },
  {
    kind: 'suggestion',
    source: 'prompt suggestion fork (querySource "prompt_suggestion")',
    test: (s) => startsWith(s.lastUser, '[SUGGESTION MODE:'),
  },
  {
    kind: 'compaction',
    source: 'compact (querySource "compact"): the summary request ends the forked conversation',
    test: (s) => s.lastUser.includes('Your task is to create a detailed summary of the conversation so far'),
  },
  {
    kind: 'prewarm',
    source: 'subagent warm-up of 2.0.x: a lone "Warmup" user message',
    test: (s) => s.messages === 1 && s.lastUser.trim() === 'Warmup',
  },
  {
    kind: 'subagent',
    source:
      'built-in agents ("You are an agent for Claude Code", "You are a file search specialist for Claude Code")',
    test: (s) => /You are an? [^.\n]{0,80}\bfor Claude Code, Anthropic's official CLI/.test(s.system),
  },
];

/** Codex (@openai/codex 0.160.1, 0.171.0): x-codex-turn-metadata names the kind; this covers its absence. */
export const CODEX_RULES: readonly KindRule[] = [
  {
    kind: 'compaction',
    source: 'local compaction prompt (codex-rs core/templates/compact/prompt.md)',
    test: (s) => s.lastUser.includes('CONTEXT CHECKPOINT COMPACTION'),
  },
];

/** Pi (@mariozechner/pi-coding-agent 0.70.6, 0.73.1: dist/core/compaction). */
export const PI_RULES: readonly KindRule[] = [
  {
    kind: 'compaction',
    source: 'compaction / branch summary: "You are a context summarization assistant"',
    test: (s) => (s.tools ?? 0) === 0 && /summariz/i.test(s.system + s.lastUser.slice(0, 2000)),
  },
];

/** Qwen Code (@qwen-code/qwen-code 0.24.4, bundled chunks). */
export const QWEN_RULES: readonly KindRule[] = [
  {
    kind: 'title',
    source: 'TITLE_SYSTEM_PROMPT',
    test: (s) => s.system.includes('Generate a concise, sentence-case title'),
  },
  {
    kind: 'suggestion',
    source: 'SUGGESTION_PROMPT (follow-up suggestions)',
    test: (s) => startsWith(s.lastUser, '[SUGGESTION MODE:'),
  },
  {
    kind: 'compaction',
    source: 'getCompressionPrompt (chat compression)',
    test: (s) =>
      s.system.includes('You are the component that summarizes a conversation') ||
      s.lastUser.includes('<state_snapshot>'),
  },
  {
    kind: 'next_speaker',
    source: 'checkNextSpeaker CHECK_PROMPT',
    test: (s) =>
      startsWith(s.lastUser, 'Analyze *only* the content and structure of your immediately preceding'),
  },
  {
    kind: 'memory',
    source: 'managed memory extraction subagent',
    test: (s) => s.system.includes('managed memory extraction subagent'),
  },
  {
    kind: 'subagent',
    source: 'built-in subagents (general-purpose, Explore, review) systemPrompt',
    test: (s) =>
      /^You are (a general-purpose subagent working for a parent agent|a file search specialist agent|one part of a code review)/.test(
        s.system.trimStart(),
      ),
  },
];
