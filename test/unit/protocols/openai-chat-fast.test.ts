import assert from 'node:assert/strict';
import { test } from 'node:test';
import { requestSchema } from '../../../src/protocols/openai-chat/chat-api.ts';
import { isPlainRequest, parseRequest } from '../../../src/protocols/openai-chat/convert-request.ts';
import { seededRandom } from '../../../src/util/random.ts';

function baseBody(): Record<string, unknown> {
  return {
    model: 'm',
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: 100,
    temperature: 0.7,
    top_p: 0.9,
    stop: ['</x>'],
    parallel_tool_calls: true,
    tool_choice: 'auto',
    reasoning_effort: 'low',
    messages: [
      { role: 'system', content: 'sys' },
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
      {
        role: 'assistant',
        content: null,
        reasoning_content: 'think',
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', name: 'bash', content: 'out' },
    ],
    tools: [
      { type: 'function', function: { name: 'bash', description: 'run', parameters: { type: 'object' } } },
    ],
  };
}

// odd values a field may take: some the schema accepts, some it refuses
const ODD: unknown[] = [
  null,
  undefined,
  0,
  -1,
  1.5,
  '',
  'x',
  true,
  [],
  [1],
  ['s'],
  {},
  { name: 'n' },
  Number.NaN,
];
// where they go: [path into the body]
const PATHS: (string | number)[][] = [
  ['model'],
  ['stream'],
  ['stream_options'],
  ['stream_options', 'include_usage'],
  ['max_tokens'],
  ['max_completion_tokens'],
  ['temperature'],
  ['top_p'],
  ['stop'],
  ['parallel_tool_calls'],
  ['tool_choice'],
  ['tool_choice', 'function'],
  ['reasoning_effort'],
  ['messages'],
  ['messages', 0],
  ['messages', 0, 'role'],
  ['messages', 0, 'content'],
  ['messages', 1, 'content', 0],
  ['messages', 1, 'content', 0, 'type'],
  ['messages', 1, 'content', 0, 'text'],
  ['messages', 2, 'tool_calls'],
  ['messages', 2, 'tool_calls', 0, 'id'],
  ['messages', 2, 'tool_calls', 0, 'type'],
  ['messages', 2, 'tool_calls', 0, 'function'],
  ['messages', 2, 'tool_calls', 0, 'function', 'arguments'],
  ['messages', 2, 'reasoning'],
  ['messages', 3, 'name'],
  ['messages', 3, 'tool_call_id'],
  ['tools'],
  ['tools', 0],
  ['tools', 0, 'type'],
  ['tools', 0, 'function'],
  ['tools', 0, 'function', 'parameters'],
  ['tools', 0, 'function', 'description'],
];

function setPath(body: Record<string, unknown>, path: (string | number)[], value: unknown): void {
  let at = body as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) {
    const next = at[key];
    if (typeof next !== 'object' || next === null) {
      at[key] = {};
    }
    at = at[key] as Record<string | number, unknown>;
  }
  at[path[path.length - 1]!] = value;
}

test('the fast check accepts only what the schema accepts, and the conversion is the same either way', () => {
  const rand = seededRandom(11);
  let fast = 0;
  let refused = 0;
  for (let round = 0; round < 3000; round++) {
    const body = baseBody();
    const edits = 1 + ((rand() * 3) | 0);
    for (let e = 0; e < edits; e++) {
      setPath(body, PATHS[(rand() * PATHS.length) | 0]!, structuredClone(ODD[(rand() * ODD.length) | 0]));
    }
    const parsed = requestSchema.safeParse(body);
    if (isPlainRequest(body)) {
      fast++;
      assert.ok(parsed.success, `accepted by the fast check, refused by the schema: ${JSON.stringify(body)}`);
      // the conversion of the schema's output is what the proxy did before: the same
      assert.deepEqual(parseRequest(body), parseRequest(parsed.data));
    } else if (!parsed.success) {
      refused++;
      assert.throws(() => parseRequest(body));
    } else {
      assert.deepEqual(parseRequest(body), parseRequest(parsed.data));
    }
  }
  // both sides were exercised
  assert.ok(fast > 100 && refused > 100, `fast ${fast}, refused ${refused}`);
});

test('the common request takes the fast check', () => {
  assert.equal(isPlainRequest(baseBody()), true);
  assert.equal(
    isPlainRequest({
      ...baseBody(),
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: 'u' }] }],
    }),
    false,
  );
});
