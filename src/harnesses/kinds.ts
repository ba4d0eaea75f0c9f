/**
 * Side calls recognised by request shape, per harness (docs/harnesses.md lists them with the versions
 * checked). A side call (title, prompt suggestion, compaction, subagent, warm-up, memory extraction, loop
 * and next-speaker checks) is
 * recorded as `harness_meta.request_kind`; `polar build` gives it a trace of its own, never the root
 * chain (src/trajectory/merge.ts OWN_TRACE_KINDS). The texts matched are the harnesses' own prompts, read
 * from the published packages named at each rule; a rule never guesses from size or timing.
 */

/**
 * The parts of a request a rule looks at, whatever the wire API (chat, Responses, Anthropic Messages,
 * Gemini).
 */
export interface RequestShape {
  /** system / developer text (Anthropic `system`, Responses `instructions` + developer items, chat system, Gemini `systemInstruction`) */
  system: string;
  /** text of the last user message (Gemini: the last user content with text, not only function responses) */
  lastUser: string;
  /** number of tools offered, or null when the request has no tools field */
  tools: number | null;
  /** the names of the tools offered (Gemini's built-in tools by their key: googleSearch, urlContext) */
  toolNames: string[];
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

type Item = { role?: string; content?: unknown };

/** Gemini contents as chat items: `model` is the assistant; a user content without text answers tools */
function geminiItems(contents: unknown[]): Item[] {
  return contents.map((c) => {
    const { role, parts } = (c ?? {}) as { role?: string; parts?: unknown };
    const list = Array.isArray(parts) ? (parts as Array<{ text?: unknown }>) : [];
    if (role === 'model') return { role: 'assistant', content: list };
    return { role: list.some((p) => typeof p?.text === 'string') ? 'user' : 'tool', content: list };
  });
}

function toolNamesOf(tools: unknown[]): string[] {
  return tools.flatMap((t) => {
    const tool = (t ?? {}) as Record<string, unknown>;
    if (Array.isArray(tool.functionDeclarations))
      return (tool.functionDeclarations as Array<{ name?: unknown }>).map((d) => String(d?.name));
    const name = tool.name ?? (tool.function as { name?: unknown } | undefined)?.name;
    // a Gemini built-in tool is an object with one key: `{googleSearch: {}}`
    return [String(name ?? Object.keys(tool)[0] ?? '')];
  });
}

export function requestShape(body: unknown): RequestShape {
  const b = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
  const items: Item[] = Array.isArray(b.messages)
    ? b.messages
    : Array.isArray(b.input)
      ? b.input
      : Array.isArray(b.contents)
        ? geminiItems(b.contents)
        : [];
  const instruction = b.systemInstruction as { parts?: unknown } | string | undefined;
  const system = [
    text(b.system),
    typeof b.instructions === 'string' ? b.instructions : '',
    typeof instruction === 'string' ? instruction : text(instruction?.parts),
  ]
    .concat(items.filter((m) => m?.role === 'system' || m?.role === 'developer').map((m) => text(m.content)))
    .filter(Boolean)
    .join('\n');
  const lastUser = [...items].reverse().find((m) => m?.role === 'user');
  const toolNames = Array.isArray(b.tools) ? toolNamesOf(b.tools) : [];
  return {
    system,
    lastUser: text(lastUser?.content),
    tools: Array.isArray(b.tools) ? toolNames.length : null,
    toolNames,
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

/** The next-speaker check of Gemini CLI, which Qwen Code forked with the same prompt. */
const NEXT_SPEAKER: KindRule = {
  kind: 'next_speaker',
  source: 'checkNextSpeaker CHECK_PROMPT (Gemini CLI packages/core/src/utils/nextSpeakerChecker.ts)',
  test: (s) =>
    startsWith(s.lastUser, 'Analyze *only* the content and structure of your immediately preceding'),
};

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
  NEXT_SPEAKER,
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

/**
 * Gemini CLI (@google/gemini-cli 0.56.0 and 0.61.0: bundle/chunk-*.js, upstream packages/core/src paths
 * named at each rule). The utility calls go to model aliases (next-speaker-checker, loop-detection,
 * chat-compression-*, web-search, ...) that all resolve to the one model polar serves.
 */
export const GEMINI_RULES: readonly KindRule[] = [
  {
    kind: 'compaction',
    source: 'context/chatCompressionService.ts getCompressionPrompt (the summary and its verification call)',
    test: (s) => s.system.includes('distilling chat history into a structured XML <state_snapshot>'),
  },
  NEXT_SPEAKER,
  {
    kind: 'loop_detection',
    source: 'services/loopDetectionService.ts LOOP_DETECTION_SYSTEM_PROMPT',
    test: (s) =>
      startsWith(s.system, 'You are a diagnostic agent that determines whether a conversational AI'),
  },
  {
    kind: 'edit_correction',
    source: 'utils/llm-edit-fixer.ts EDIT_SYS_PROMPT, utils/editCorrector.ts (system prompt, escaping check)',
    test: (s) =>
      startsWith(s.system, 'You are an expert code-editing assistant') ||
      startsWith(s.lastUser, 'Context: An LLM has just generated potentially_problematic_string'),
  },
  {
    kind: 'summary',
    source:
      'services/sessionSummaryService.ts SUMMARY_PROMPT, utils/summarizer.ts SUMMARIZE_TOOL_OUTPUT_PROMPT',
    test: (s) =>
      startsWith(s.lastUser, "Summarize the user's primary intent or goal in this conversation") ||
      startsWith(s.lastUser, 'Summarize the following tool output to be a maximum of'),
  },
  {
    kind: 'web_search',
    source: 'tools/web-search.ts: model alias "web-search", tools [{googleSearch: {}}]',
    test: (s) => s.toolNames.includes('googleSearch'),
  },
  {
    kind: 'web_fetch',
    source: 'tools/web-fetch.ts: model alias "web-fetch", tools [{urlContext: {}}]',
    test: (s) => s.toolNames.includes('urlContext'),
  },
  {
    kind: 'router',
    source: 'routing/strategies/classifierStrategy.ts CLASSIFIER_SYSTEM_PROMPT (model "auto" only)',
    test: (s) => s.system.includes('You are a specialized Task Routing AI'),
  },
  {
    kind: 'subagent',
    source:
      'agents/local-executor.ts: every local subagent (codebase_investigator, generalist, cli_help) gets complete_task',
    test: (s) => s.toolNames.includes('complete_task'),
  },
];

/**
 * OpenCode (opencode-ai 1.17.19 and 1.18.33: the JavaScript bundled in the opencode-linux-x64 binary;
 * upstream anomalyco/opencode packages/opencode/src/agent/prompt/*.txt). Each hidden agent has its own
 * system prompt.
 */
export const OPENCODE_RULES: readonly KindRule[] = [
  {
    kind: 'title',
    source: 'agent "title" (prompt/title.txt)',
    test: (s) => startsWith(s.system, 'You are a title generator'),
  },
  {
    kind: 'summary',
    source: 'agent "summary" (prompt/summary.txt)',
    test: (s) => startsWith(s.system, 'Summarize what was done in this conversation'),
  },
  {
    kind: 'compaction',
    source:
      'agent "compaction" (prompt/compaction.txt): 1.18.33 "You are a context summarization agent", 1.17.19 "You are an anchored context summarization assistant", upstream earlier "You are summarizing a conversation"',
    test: (s) =>
      startsWith(s.system, 'You are a context summarization agent') ||
      startsWith(s.system, 'You are an anchored context summarization assistant') ||
      startsWith(s.system, 'You are summarizing a conversation for continuation by another agent'),
  },
  {
    kind: 'subagent',
    source: 'agent "explore" (prompt/explore.txt), run by the task tool',
    test: (s) => startsWith(s.system, 'You are a file search specialist'),
  },
];
