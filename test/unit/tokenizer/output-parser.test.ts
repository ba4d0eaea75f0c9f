import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { CanonicalTool } from '../../../src/protocols/canonical.ts';
import { OutputParser, type ParsedEvent } from '../../../src/tokenizer/output-parser.ts';

function parseAll(chunks: string[], options: ConstructorParameters<typeof OutputParser>[0] = {}) {
  const parser = new OutputParser(options);
  const events: ParsedEvent[] = [];
  for (const chunk of chunks) events.push(...parser.push(chunk));
  events.push(...parser.end());
  return { parser, events };
}

function fold(events: ParsedEvent[]) {
  let text = '';
  let reasoning = '';
  const calls: { name: string; arguments: string }[] = [];
  for (const e of events) {
    if (e.type === 'text') text += e.text;
    else if (e.type === 'reasoning') reasoning += e.text;
    else calls.push({ name: e.name, arguments: e.arguments });
  }
  return { text, reasoning, calls };
}

/** splits a string at the given cut points */
function cut(text: string, points: number[]): string[] {
  const sorted = [...new Set(points.map((p) => p % (text.length + 1)))].sort((a, b) => a - b);
  const out: string[] = [];
  let last = 0;
  for (const p of sorted) {
    out.push(text.slice(last, p));
    last = p;
  }
  out.push(text.slice(last));
  return out;
}

const tools: CanonicalTool[] = [
  {
    name: 'edit',
    description: 'edit a file',
    parameters: {
      type: 'object',
      properties: {
        path: { type: 'string' },
        line: { type: 'integer' },
        force: { type: 'boolean' },
        opts: { type: 'object' },
      },
    },
  },
];

const hermesParallel =
  '<think>\nI need two files.\n</think>\n\nReading both.\n<tool_call>\n{"name": "read", "arguments": {"path": "a.txt"}}\n</tool_call>\n<tool_call>\n{"name": "read", "arguments": {"path": "b <b>.txt", "n": 2}}\n</tool_call>';

const coderCall =
  'Let me edit.\n<tool_call>\n<function=edit>\n<parameter=path>\nsrc/x.ts\n</parameter>\n<parameter=line>\n42\n</parameter>\n<parameter=force>\ntrue\n</parameter>\n<parameter=opts>\n{"a": [1, 2]}\n</parameter>\n</function>\n</tool_call>';

describe('OutputParser', () => {
  it('parses reasoning, text and parallel Qwen3 JSON tool calls', () => {
    const { parser, events } = parseAll([hermesParallel]);
    const folded = fold(events);
    assert.equal(folded.reasoning, 'I need two files.');
    assert.equal(folded.text, 'Reading both.');
    assert.deepEqual(
      folded.calls.map((c) => [c.name, JSON.parse(c.arguments)]),
      [
        ['read', { path: 'a.txt' }],
        ['read', { path: 'b <b>.txt', n: 2 }],
      ],
    );
    assert.deepEqual(parser.errors, []);
    assert.equal(parser.content, 'Reading both.');
  });

  it('parses Qwen3-Coder XML calls with schema types', () => {
    const { parser, events } = parseAll([coderCall], { tools });
    const folded = fold(events);
    assert.equal(folded.text, 'Let me edit.');
    assert.equal(folded.calls.length, 1);
    assert.equal(folded.calls[0]!.name, 'edit');
    assert.deepEqual(JSON.parse(folded.calls[0]!.arguments), {
      path: 'src/x.ts',
      line: 42,
      force: true,
      opts: { a: [1, 2] },
    });
    assert.deepEqual(parser.errors, []);
  });

  it('gives the same result however the stream is split', () => {
    for (const [text, opts] of [
      [hermesParallel, {}],
      [coderCall, { tools }],
      ['<think>\n\nhm <tool_c\n\n</think>\n\nAnswer with <tool_cal text', {}],
    ] as const) {
      const whole = fold(parseAll([text], opts).events);
      fc.assert(
        fc.property(fc.array(fc.nat(), { maxLength: 12 }), (points) => {
          assert.deepEqual(fold(parseAll(cut(text, points), opts).events), whole);
        }),
        { numRuns: 150 },
      );
    }
  });

  it('holds back a partial tag until it is known', () => {
    const parser = new OutputParser();
    assert.deepEqual(parser.push('Hello <tool'), [{ type: 'text', text: 'Hello' }]);
    assert.deepEqual(parser.push('_ca'), []);
    assert.deepEqual(parser.push('t is not a tag'), [{ type: 'text', text: ' <tool_cat is not a tag' }]);
  });

  it('passes malformed calls on as text with an error, keeping the good ones', () => {
    const text =
      '<tool_call>\n{"name": "read", "arguments": {"path": "a"\n</tool_call>\n<tool_call>\n{"name": "ok", "arguments": {}}\n</tool_call>\n<tool_call>\n{"arguments": {}}\n</tool_call>';
    const { parser, events } = parseAll([text]);
    const folded = fold(events);
    assert.deepEqual(
      folded.calls.map((c) => c.name),
      ['ok'],
    );
    assert.equal(parser.errors.length, 2);
    assert.deepEqual(
      parser.errors.map((e) => e.block),
      [0, 2],
    );
    assert.match(parser.errors[0]!.reason, /not valid JSON/);
    assert.match(parser.errors[1]!.reason, /no "name"/);
    assert.ok(folded.text.includes('{"name": "read", "arguments": {"path": "a"'));
    assert.ok(folded.text.includes('{"arguments": {}}'));
  });

  it('reports an unclosed call at the end of the stream as text', () => {
    const { parser, events } = parseAll(['Sure.\n<tool_call>\n{"name": "read", "argum']);
    const folded = fold(events);
    assert.equal(folded.calls.length, 0);
    assert.equal(parser.errors.length, 1);
    assert.match(parser.errors[0]!.reason, /unclosed/);
    assert.ok(folded.text.endsWith('<tool_call>\n{"name": "read", "argum'));
  });

  it('reports a malformed XML call', () => {
    const { parser, events } = parseAll([
      '<tool_call>\n<function=edit>\n<parameter=path>\nx\n</function>\n</tool_call>',
    ]);
    assert.equal(fold(events).calls.length, 0);
    assert.equal(parser.errors.length, 1);
    assert.ok(fold(events).text.includes('<function=edit>'));
  });

  it('starts in reasoning when the prompt opened <think>', () => {
    const { events } = parseAll(['plan it\n</think>\n\nDone.'], { startInReasoning: true });
    assert.deepEqual(fold(events), { text: 'Done.', reasoning: 'plan it', calls: [] });
  });

  it('treats <think> after content as text', () => {
    const { events } = parseAll(['Hi <think>x</think>']);
    assert.deepEqual(fold(events), { text: 'Hi <think>x</think>', reasoning: '', calls: [] });
  });
});
