/**
 * parseWithPromptIds (src/util/prompt-ids.ts) is JSON.parse: the same value, key for key and in key
 * order, and the same error, whatever the answer holds; the prompt ids it remembers only save parsing.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseWithPromptIds, promptIdsReused } from '../../../src/util/prompt-ids.ts';
import { seededRandom } from '../../../src/util/random.ts';

const rand = seededRandom(7);
const ids = (n: number): number[] => Array.from({ length: n }, () => (rand() * 151_000) | 0);

/** vLLM's first chunk (pydantic's compact JSON, prompt_token_ids after choices) */
const firstChunk = (prompt: unknown, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'Qwen/Qwen3-4B',
    choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
    ...extra,
    prompt_token_ids: prompt,
  });

/** parseWithPromptIds agrees with JSON.parse: value and key order, or the error message. */
function same(text: string): unknown {
  let expected: unknown;
  try {
    expected = JSON.parse(text);
  } catch (error) {
    assert.throws(() => parseWithPromptIds(text), { name: 'SyntaxError', message: (error as Error).message });
    return undefined;
  }
  const got = parseWithPromptIds(text);
  assert.deepEqual(got, expected);
  assert.equal(JSON.stringify(got), JSON.stringify(expected), 'the same keys in the same order');
  return got;
}

describe('prompt ids parsed with what earlier answers held', () => {
  test('first sight, the same ids again, then a longer conversation: the same values as JSON.parse', () => {
    const turn1 = ids(3000);
    const before = { ...promptIdsReused };
    same(firstChunk(turn1));
    same(firstChunk(turn1));
    assert.equal(promptIdsReused.same, before.same + 1, "the second answer reused the first one's ids");
    const turn2 = [...turn1, ...ids(500)];
    same(firstChunk(turn2));
    const turn3 = [...turn2, ...ids(700)];
    same(firstChunk(turn3));
    assert.equal(promptIdsReused.extended, before.extended + 2, 'turns 2 and 3 parsed only their new ids');
    // a branch from turn 1 (a subagent, a retry), and turn 2 again after turn 3 replaced it
    same(firstChunk([...turn1, ...ids(20)]));
    same(firstChunk(turn2));
    // the same start, then a change in the middle; a shorter prompt (a compaction)
    const changed = turn3.slice();
    changed[1500] = (changed[1500]! + 1) % 151_000;
    same(firstChunk(changed));
    same(firstChunk(turn1.slice(0, 2000)));
  });

  test('a long prompt, its text remembered in pieces: growth over many turns, a change in any piece', () => {
    // 30k ids are about 180k characters: three pieces of 64k, then one more per turn
    let prompt = ids(30_000);
    const before = { ...promptIdsReused };
    same(firstChunk(prompt));
    for (let turn = 0; turn < 6; turn++) {
      prompt = [...prompt, ...ids(1 + ((rand() * 400) | 0))];
      same(firstChunk(prompt));
    }
    same(firstChunk(prompt));
    assert.equal(promptIdsReused.extended, before.extended + 6, 'each turn parsed only its new ids');
    assert.equal(promptIdsReused.same, before.same + 1);
    const text = firstChunk(prompt);
    const at = text.indexOf('"prompt_token_ids":[') + '"prompt_token_ids":['.length;
    // an id changed in each first-copied piece, at a piece's first and last characters, and in a turn's
    // own piece: never the remembered ids
    for (const offset of [10, 65_535, 65_536, 100_000, 131_072, text.length - at - 50]) {
      const i = at + offset;
      const digit = text[i]! >= '0' && text[i]! <= '9' ? i : i + 1;
      const changed = `${text.slice(0, digit)}${text[digit] === '9' ? '8' : '9'}${text.slice(digit + 1)}`;
      const reused = { ...promptIdsReused };
      same(changed);
      assert.deepEqual(promptIdsReused, reused, `a change at ${offset} was not taken for the remembered ids`);
    }
    // the same again, then a compaction and a branch from it
    same(text);
    same(firstChunk(prompt.slice(0, 20_000)));
    same(firstChunk([...prompt.slice(0, 20_000), ...ids(10)]));
  });

  test('each answer gets an array of its own: changing it changes nothing later', () => {
    const prompt = ids(2000);
    const a = parseWithPromptIds(firstChunk(prompt)) as { prompt_token_ids: number[] };
    a.prompt_token_ids.fill(0);
    a.prompt_token_ids.push(1);
    const b = parseWithPromptIds(firstChunk(prompt)) as { prompt_token_ids: number[] };
    assert.deepEqual(b.prompt_token_ids, prompt);
    b.prompt_token_ids.length = 0;
    const c = parseWithPromptIds(firstChunk([...prompt, 5])) as { prompt_token_ids: number[] };
    assert.deepEqual(c.prompt_token_ids, [...prompt, 5]);
    // the remembered array grows in place into the next, longer one: what was handed out stays as it was
    const d = parseWithPromptIds(firstChunk([...prompt, 5, 6, 7])) as { prompt_token_ids: number[] };
    assert.deepEqual(d.prompt_token_ids, [...prompt, 5, 6, 7]);
    assert.deepEqual(c.prompt_token_ids, [...prompt, 5]);
    assert.deepEqual(
      (parseWithPromptIds(firstChunk([...prompt, 5, 8])) as { prompt_token_ids: number[] }).prompt_token_ids,
      [...prompt, 5, 8],
    );
  });

  test('what is not a plain top-level array of numbers goes to JSON.parse', () => {
    const prompt = ids(1000);
    same(firstChunk(prompt));
    const text = firstChunk(prompt);
    // nested under another key (the top-level one absent, or null)
    same(JSON.stringify({ choices: [{ prompt_token_ids: prompt }] }));
    same(JSON.stringify({ choices: [{ prompt_token_ids: prompt }], prompt_token_ids: null }));
    // the key twice: the last one counts, in JSON.parse as here
    same(`${text.slice(0, -1)},"prompt_token_ids":[1,2,3]}`);
    same(`{"prompt_token_ids":[1,2,3],${text.slice(1)}`);
    // an array of other things, or of arrays, after the remembered ids
    same(firstChunk([...prompt, 'x']));
    same(firstChunk([...prompt, [1, 2]]));
    same(firstChunk([...prompt, { a: 1 }]));
    same(firstChunk([[...prompt]]));
    // a string that spells the key (escaped quotes: never the key itself)
    same(JSON.stringify({ note: '"prompt_token_ids":[1,2]', prompt_token_ids: prompt }));
    // whitespace inside the array; a server that writes `": ["` (Python's json.dumps)
    same(text.replace(/,/g, ', '));
    same(JSON.stringify({ a: 1, prompt_token_ids: prompt }, null, 1));
    // numbers JSON writes in other forms
    same(firstChunk([...prompt.slice(0, 500), 1.5, -2, 1e3]).replace('1000]', '1e3]'));
    same(`{"__proto__":{"x":1},"prompt_token_ids":[${prompt.join(',')}]}`);
  });

  test('text that is not JSON throws what JSON.parse throws for it', () => {
    const prompt = ids(1000);
    const text = firstChunk(prompt);
    same(text);
    // a trailing comma after the remembered ids; nothing after the comma; a cut-off answer
    same(text.replace(/]}$/, ',]}'));
    same(text.replace(/]}$/, ', ]}'));
    same(text.slice(0, -2));
    same(text.slice(0, text.length >> 1));
    // broken outside the array, and inside it
    same(text.replace('"created":1', '"created":'));
    same(text.replace(`${prompt[500]},`, `${prompt[500]},,`));
    same(text.replace(`${prompt[900]},`, `${prompt[900]}x,`));
    same(`${text}x`);
  });

  test('random conversations and edits: always JSON.parse', () => {
    const conversations = Array.from({ length: 4 }, () => ids(300 + ((rand() * 2000) | 0)));
    for (let i = 0; i < 300; i++) {
      const k = (rand() * conversations.length) | 0;
      const base = conversations[k]!;
      const r = rand();
      let next: number[];
      if (r < 0.5) next = [...base, ...ids(1 + ((rand() * 300) | 0))];
      else if (r < 0.65) next = base.slice();
      else if (r < 0.8) next = base.slice(0, Math.max(1, (rand() * base.length) | 0));
      else {
        next = base.slice();
        next[(rand() * next.length) | 0] = (rand() * 151_000) | 0;
      }
      if (rand() < 0.5) conversations[k] = next;
      const text = firstChunk(next);
      same(rand() < 0.05 ? text.replace(/]}$/, ',]}') : text);
    }
  });
});
