/**
 * Side calls are recognised by request shape: real first/after-tool requests (shared/samples, trimmed
 * captures of the real harnesses) are ordinary turns; requests carrying each harness's own side-call
 * prompt (texts from the published packages, see src/harnesses/kinds.ts) get their kind.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { HARNESSES } from '../../../src/harnesses/index.ts';
import {
  CLAUDE_RULES,
  CODEX_RULES,
  GEMINI_RULES,
  OPENCODE_RULES,
  PI_RULES,
  QWEN_RULES,
  requestShape,
} from '../../../src/harnesses/kinds.ts';
import { type MergeCall, mergeCalls } from '../../../src/trajectory/merge.ts';
import { ROOT } from '../../support/cli.ts';

const SAMPLES = join(ROOT, 'fixtures/samples/harness-requests');
const sample = (name: string) =>
  JSON.parse(readFileSync(join(SAMPLES, name), 'utf8')) as { headers: Record<string, string>; body: unknown };
const kindOf = (harness: keyof typeof HARNESSES, body: unknown, headers: Record<string, string> = {}) =>
  HARNESSES[harness].callMeta(headers, body).request_kind;

describe('request shape', () => {
  test('system, last user text and tools across the three wire APIs', () => {
    const chat = requestShape({
      messages: [
        { role: 'system', content: 'S' },
        { role: 'user', content: [{ type: 'text', text: 'U1' }] },
        { role: 'assistant', content: 'A' },
        { role: 'user', content: 'U2' },
      ],
      tools: [{}],
    });
    assert.deepEqual(chat, { system: 'S', lastUser: 'U2', tools: 1, toolNames: [''], messages: 4 });
    const anthropic = requestShape({
      system: [{ type: 'text', text: 'S1' }],
      messages: [{ role: 'user', content: 'U' }],
    });
    assert.deepEqual(anthropic, { system: 'S1', lastUser: 'U', tools: null, toolNames: [], messages: 1 });
    const responses = requestShape({
      instructions: 'I',
      input: [
        { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'D' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'U' }] },
      ],
      tools: [],
    });
    assert.deepEqual(responses, { system: 'I\nD', lastUser: 'U', tools: 0, toolNames: [], messages: 2 });
    // Gemini: model turns are the assistant's, a user content of function responses answers tools
    const gemini = requestShape({
      systemInstruction: { role: 'user', parts: [{ text: 'S' }] },
      contents: [
        { role: 'user', parts: [{ text: 'U1' }] },
        { role: 'model', parts: [{ functionCall: { name: 'f' } }] },
        { role: 'user', parts: [{ functionResponse: { name: 'f', response: {} } }] },
      ],
      tools: [{ functionDeclarations: [{ name: 'f' }, { name: 'complete_task' }] }, { googleSearch: {} }],
    });
    assert.deepEqual(gemini, {
      system: 'S',
      lastUser: 'U1',
      tools: 3,
      toolNames: ['f', 'complete_task', 'googleSearch'],
      messages: 3,
    });
  });
});

describe('side-call kinds per harness', () => {
  test('real turns of every harness are not side calls', () => {
    for (const [harness, file] of [
      ['claude', 'claude-1-first-request.json'],
      ['claude', 'claude-2-after-tool.json'],
      ['claude', 'claude-bare-request.json'],
      ['codex', 'codex-1-first-request.json'],
      ['codex', 'codex-2-after-tool.json'],
      ['pi', 'pi-chat-1-first-request.json'],
      ['pi', 'pi-chat-2-after-tool.json'],
      ['pi', 'pi-responses-2-after-tool.json'],
      ['pi', 'pi-anthropic-2-after-tool.json'],
      ['gemini', 'gemini-1-first-request.json'],
      ['gemini', 'gemini-2-after-tool.json'],
      ['opencode', 'opencode-1-first-request.json'],
      ['opencode', 'opencode-2-after-tool.json'],
    ] as const) {
      const s = sample(file);
      const kind = kindOf(harness, s.body, harness === 'codex' ? {} : s.headers);
      assert.ok(kind === undefined || kind === 'turn', `${file}: ${kind}`);
    }
  });

  test('real compaction requests: Codex (by text, without its header) and Pi', () => {
    assert.equal(kindOf('codex', sample('codex-3-compaction-request.json').body), 'compaction');
    assert.equal(kindOf('pi', sample('pi-chat-3-compaction-request.json').body), 'compaction');
  });

  test('a real OpenCode title request; its session id is the thread', () => {
    const s = sample('opencode-title-request.json');
    const meta = HARNESSES.opencode.callMeta(s.headers, s.body);
    assert.equal(meta.request_kind, 'title');
    assert.match(String(meta.thread_id), /^ses_/);
  });

  test("codex: the header's kind wins over the shape", () => {
    const body = sample('codex-3-compaction-request.json').body;
    const meta = HARNESSES.codex.callMeta({ 'x-codex-turn-metadata': '{"request_kind":"prewarm"}' }, body);
    assert.equal(meta.request_kind, 'prewarm');
  });

  const claude = (system: string, lastUser: string, extra: Record<string, unknown> = {}) => ({
    system: [
      { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.332' },
      { type: 'text', text: system },
    ],
    messages: [{ role: 'user', content: [{ type: 'text', text: lastUser }] }],
    tools: [{ name: 'Bash' }],
    ...extra,
  });
  const MAIN = "You are a Claude agent, built on Anthropic's Claude Agent SDK.";
  for (const [kind, body] of [
    [
      'title',
      claude(
        'Generate a concise, sentence-case title (3-7 words) that captures the main topic',
        '<session>fix it</session>',
        { tools: [] },
      ),
    ],
    [
      'suggestion',
      claude(MAIN, '[SUGGESTION MODE: Suggest what the user might naturally type next into Claude Code.]'),
    ],
    [
      'compaction',
      claude(
        MAIN,
        "Your task is to create a detailed summary of the conversation so far, paying close attention to the user's explicit requests",
      ),
    ],
    ['prewarm', claude(MAIN, 'Warmup')],
    [
      'subagent',
      claude(
        "You are a file search specialist for Claude Code, Anthropic's official CLI for Claude. You excel at",
        'Find the config loader',
      ),
    ],
    [
      'subagent',
      claude(
        "You are an agent for Claude Code, Anthropic's official CLI for Claude. Given the user's message",
        'Do X',
      ),
    ],
    ['side', claude(MAIN, 'anything', { tools: [] })],
  ] as const) {
    test(`claude: ${kind}`, () => assert.equal(kindOf('claude', body), kind));
  }
  test('claude: the main agent is a turn', () =>
    assert.equal(kindOf('claude', claude(MAIN, 'ECHO hi')), undefined));

  const qwen = (system: string, lastUser: string) => ({
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: lastUser },
    ],
    tools: [{ type: 'function', function: { name: 'run_shell_command' } }],
  });
  const QMAIN = 'You are Qwen Code, a non-interactive CLI agent developed by Alibaba Group';
  for (const [kind, body] of [
    ['title', qwen('Generate a concise, sentence-case title (3-7 words) that captures what this', 'x')],
    ['suggestion', qwen(QMAIN, '[SUGGESTION MODE: Suggest what the user might naturally type next.]')],
    ['compaction', qwen('You are the component that summarizes a conversation when its context window', 'x')],
    [
      'next_speaker',
      qwen(QMAIN, 'Analyze *only* the content and structure of your immediately preceding response'),
    ],
    [
      'memory',
      qwen('You are now acting as the managed memory extraction subagent for an AI coding assistant.', 'x'),
    ],
    ['subagent', qwen('You are a general-purpose subagent working for a parent agent. Complete only', 'x')],
    ['subagent', qwen('You are a file search specialist agent. You excel at', 'x')],
  ] as const) {
    test(`qwen: ${kind}`, () => assert.equal(kindOf('qwen', body), kind));
  }
  test('qwen: the main agent, even with a user system prompt, is a turn', () => {
    assert.equal(kindOf('qwen', qwen(QMAIN, 'ECHO hi')), undefined);
    assert.equal(kindOf('qwen', qwen('You are a careful engineer.', 'ECHO hi')), undefined);
  });

  // Gemini CLI's utility calls, with the texts of @google/gemini-cli 0.61.0 (bundle/chunk-*.js)
  const gemini = (
    system: string,
    lastUser: string,
    tools: unknown[] = [{ functionDeclarations: [{ name: 'run_shell_command' }] }],
  ) => ({
    ...(system ? { systemInstruction: { role: 'user', parts: [{ text: system }] } } : {}),
    contents: [
      { role: 'user', parts: [{ text: 'ECHO hi' }] },
      { role: 'model', parts: [{ text: 'Ran it.' }] },
      { role: 'user', parts: [{ text: lastUser }] },
    ],
    tools,
  });
  const GMAIN = 'You are Gemini CLI, an autonomous CLI agent specializing in software engineering tasks.';
  for (const [kind, body] of [
    [
      'compaction',
      gemini(
        '\nYou are a specialized system component responsible for distilling chat history into a structured XML <state_snapshot>.',
        'Generate a new <state_snapshot> based on the provided history.',
        [],
      ),
    ],
    [
      'next_speaker',
      gemini(
        '',
        'Analyze *only* the content and structure of your immediately preceding response (your last turn',
      ),
    ],
    [
      'loop_detection',
      gemini(
        'You are a diagnostic agent that determines whether a conversational AI assistant is stuck in an unproductive loop.',
        'Recent conversation history:',
        [],
      ),
    ],
    [
      'edit_correction',
      gemini('\nYou are an expert code-editing assistant specializing in debugging and correcting', 'x', []),
    ],
    [
      'edit_correction',
      gemini('', 'Context: An LLM has just generated potentially_problematic_string and the text', []),
    ],
    [
      'summary',
      gemini('', "Summarize the user's primary intent or goal in this conversation in ONE sentence", []),
    ],
    ['summary', gemini('', 'Summarize the following tool output to be a maximum of 2000 tokens.', [])],
    ['web_search', gemini('', 'polar rl', [{ googleSearch: {} }])],
    ['web_fetch', gemini('', 'Summarize https://example.com', [{ urlContext: {} }])],
    ['router', gemini('\nYou are a specialized Task Routing AI. Your sole function is to analyze', 'x', [])],
    [
      'subagent',
      gemini(GMAIN, 'Investigate', [
        { functionDeclarations: [{ name: 'read_file' }, { name: 'complete_task' }] },
      ]),
    ],
  ] as const) {
    test(`gemini: ${kind}`, () => assert.equal(kindOf('gemini', body), kind));
  }
  test('gemini: the main agent is a turn', () =>
    assert.equal(kindOf('gemini', gemini(GMAIN, 'ECHO hi')), undefined));

  // OpenCode's hidden agents, with the prompts of opencode-ai 1.18.33 (and the older compaction text)
  const oc = (system: string, tools = 0) => ({
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: 'x' },
    ],
    ...(tools
      ? { tools: Array.from({ length: tools }, () => ({ type: 'function', function: { name: 't' } })) }
      : {}),
  });
  for (const [kind, body] of [
    ['title', oc('You are a title generator. You output ONLY a thread title. Nothing else.')],
    ['summary', oc('Summarize what was done in this conversation. Write like a pull request description.')],
    ['compaction', oc('You are a context summarization agent. You are given a conversation between a user')],
    ['compaction', oc('You are an anchored context summarization assistant for coding sessions.')],
    ['compaction', oc('You are summarizing a conversation for continuation by another agent.')],
    ['subagent', oc('You are a file search specialist. You excel at thoroughly navigating', 3)],
  ] as const) {
    test(`opencode: ${kind}`, () => assert.equal(kindOf('opencode', body), kind));
  }
  test('opencode: the main agent is a turn', () =>
    assert.equal(kindOf('opencode', oc('You are opencode, an interactive CLI tool', 10)), undefined));
});

describe('polar build keeps every side-call kind out of the root chain', () => {
  const call = (
    seq: number,
    prompt: number[],
    completion: number[],
    requestKind: string | null,
  ): MergeCall => ({
    id: `c${seq}`,
    seq,
    prompt,
    completion,
    logprobs: null,
    tokenExact: true,
    finishReason: 'stop',
    requestKind,
    traceKind: null,
  });
  // every kind a harness rule gives, and the ones Codex's header and Claude Code's fallback give
  const KINDS = [
    ...new Set([
      ...[CLAUDE_RULES, CODEX_RULES, PI_RULES, QWEN_RULES, GEMINI_RULES, OPENCODE_RULES]
        .flat()
        .map((r) => r.kind),
      'prewarm',
      'side',
    ]),
  ];
  for (const kind of KINDS) {
    test(`${kind}: its own trace, and the next turn still extends the root`, () => {
      // the side call's prompt extends the root exactly (a forked suggestion/compaction does), yet must not join it
      const calls = [
        call(0, [1, 2], [3, 9], null),
        call(1, [1, 2, 3, 9, 4], [5, 9], kind),
        call(2, [1, 2, 3, 9, 6], [7, 9], null),
      ];
      const { traces } = mergeCalls(calls, { eotIds: [9], splice: false });
      const root = traces.find((t) => t.calls.includes('c0'))!;
      assert.equal(root.kind, 'root');
      assert.deepEqual(root.calls, ['c0', 'c2']);
      const side = traces.find((t) => t.calls.includes('c1'))!;
      assert.notEqual(side.kind, 'root');
      assert.deepEqual(side.calls, ['c1']);
    });
  }
});
