import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import type { StreamEvent } from '../../../src/protocols/canonical.ts';
import { ProtocolError } from '../../../src/protocols/errors.ts';
import {
  buildRequest,
  ChatStreamParser,
  completionToEvents,
  createStreamWriter,
  parseRequest,
  renderError,
  renderResponse,
} from '../../../src/protocols/openai-chat/index.ts';
import { decodeSse } from '../../../src/protocols/sse.ts';
import { SAMPLES_DIR } from './harness-samples.ts';

/** Loads a recorded request; its tools were reduced to names and params, so real schemas are rebuilt. */
const sample = (name: string) => {
  const json = JSON.parse(readFileSync(new URL(name, SAMPLES_DIR), 'utf8')) as {
    body: Record<string, unknown>;
    response: string;
  };
  const reduced = (json.body.tools as { tools?: Array<{ name: string; params: string[] }> } | undefined)
    ?.tools;
  if (reduced) {
    json.body.tools = reduced.map((t) => ({
      type: 'function',
      function: {
        name: t.name,
        description: `${t.name} tool`,
        parameters: {
          type: 'object',
          properties: Object.fromEntries(t.params.map((p) => [p, { type: 'string' }])),
        },
      },
    }));
  }
  return json;
};

describe('openai-chat request conversion', () => {
  test('pi first request: system, user, tools', () => {
    const { value, warnings } = parseRequest(sample('pi-chat-1-first-request.json').body);
    assert.equal(value.messages[0]!.role, 'system');
    assert.equal(value.messages.at(-1)!.role, 'user');
    assert.ok(value.tools.some((t) => t.name === 'bash'));
    assert.equal(value.stream, true);
    assert.ok(value.maxTokens! > 0, 'max_completion_tokens kept');
    assert.deepEqual(warnings, []);
  });

  test('pi after tool: assistant tool call and its result are matched by id', () => {
    const { value } = parseRequest(sample('pi-chat-2-after-tool.json').body);
    const assistant = value.messages.find((m) => m.role === 'assistant');
    const tool = value.messages.find((m) => m.role === 'tool');
    assert.ok(assistant && assistant.role === 'assistant' && assistant.toolCalls.length === 1);
    assert.ok(tool && tool.role === 'tool');
    assert.equal(tool.toolCallId, assistant.toolCalls[0]!.id);
    assert.equal(JSON.parse(assistant.toolCalls[0]!.arguments).command, 'echo hi');
  });

  test('opencode (1.18.33): its title call has no tools; its turn after a tool pairs call and result', () => {
    const title = parseRequest(sample('opencode-title-request.json').body).value;
    assert.equal(title.tools.length, 0);
    assert.match(title.messages[0]!.content as string, /^You are a title generator/);
    const { value, warnings } = parseRequest(sample('opencode-2-after-tool.json').body);
    assert.deepEqual(warnings, []);
    assert.equal(value.maxTokens, 8192, "the profile's output limit");
    assert.equal(value.toolChoice, 'auto');
    const assistant = value.messages.find((m) => m.role === 'assistant');
    const tool = value.messages.find((m) => m.role === 'tool');
    assert.ok(assistant?.role === 'assistant' && tool?.role === 'tool');
    assert.equal(assistant.toolCalls[0]!.name, 'bash');
    assert.equal(tool.toolCallId, assistant.toolCalls[0]!.id);
    assert.equal(tool.content, 'polarbear\n');
    // `opencode run "ECHO polarbear"` quotes a message word holding a space (see harnesses/opencode.ts)
    const user = value.messages.find((m) => m.role === 'user');
    assert.deepEqual(user?.content, [{ type: 'text', text: '"ECHO polarbear"' }]);
  });

  test('round trip: harness request -> canonical -> backend request keeps messages and tools', () => {
    const raw = sample('pi-chat-2-after-tool.json').body as { messages: unknown[]; tools: unknown[] };
    const { value } = parseRequest(raw);
    const out = buildRequest(value, { stream: true, extra: { return_token_ids: true } });
    assert.equal((out.messages as unknown[]).length, raw.messages.length);
    assert.equal((out.tools as unknown[]).length, raw.tools.length);
    assert.equal(out.return_token_ids, true);
    assert.deepEqual(out.stream_options, { include_usage: true });
    const back = parseRequest({ ...out, model: 'm' }).value;
    assert.deepEqual(back.messages, value.messages, 'parse(build(x)) == x');
  });

  test('invalid bodies name the field', () => {
    assert.throws(
      () => parseRequest({ model: 'm', messages: [{ role: 'wizard', content: 'x' }] }),
      (e: unknown) => {
        assert.ok(e instanceof ProtocolError);
        assert.match(e.message, /messages\[0\]\.role/);
        assert.equal(e.fault.status, 400);
        return true;
      },
    );
    assert.throws(() => parseRequest(null), ProtocolError);
  });

  test('non-function tools are dropped with a warning', () => {
    const { value, warnings } = parseRequest({
      model: 'm',
      messages: [{ role: 'user', content: 'x' }],
      tools: [
        { type: 'web_search' },
        { type: 'function', function: { name: 'f', parameters: { type: 'object' } } },
      ],
    });
    assert.deepEqual(
      value.tools.map((t) => t.name),
      ['f'],
    );
    assert.match(warnings[0]!, /dropped tool type web_search/);
  });
});

describe('openai-chat backend stream parsing (vLLM token-id contract)', () => {
  const chunks = [
    {
      id: 'c',
      prompt_token_ids: [1, 2, 3],
      choices: [{ index: 0, delta: { role: 'assistant', content: '' }, token_ids: [] }],
    },
    {
      id: 'c',
      choices: [
        {
          index: 0,
          delta: { reasoning_content: 'hmm' },
          token_ids: [10, 11],
          logprobs: { content: [{ logprob: -0.1 }, { logprob: -0.2 }] },
        },
      ],
    },
    {
      id: 'c',
      choices: [
        { index: 0, delta: { content: 'Hi' }, token_ids: [12], logprobs: { content: [{ logprob: -0.3 }] } },
      ],
    },
    {
      id: 'c',
      choices: [
        {
          index: 0,
          delta: {
            tool_calls: [{ index: 0, id: 'call_1', function: { name: 'bash', arguments: '{"command":' } }],
          },
          token_ids: [13],
          logprobs: { content: [{ logprob: -0.4 }] },
        },
      ],
    },
    {
      id: 'c',
      choices: [
        {
          index: 0,
          delta: { tool_calls: [{ index: 0, function: { arguments: '"ls"}' } }] },
          token_ids: [14],
          logprobs: { content: [{ logprob: -0.5 }] },
        },
      ],
    },
    {
      id: 'c',
      choices: [
        {
          index: 0,
          delta: {},
          finish_reason: 'tool_calls',
          token_ids: [151645],
          logprobs: { content: [{ logprob: -0.6 }] },
        },
      ],
    },
    { id: 'c', choices: [], usage: { prompt_tokens: 3, completion_tokens: 6 } },
  ];

  test('events, final response and token data', () => {
    const parser = new ChatStreamParser('r1', 'm');
    const events: StreamEvent[] = chunks.flatMap((c) => parser.push(c));
    const end = parser.end();
    const types = [...events, ...end.events].map((e) => e.type);
    assert.deepEqual(types, [
      'start',
      'reasoning-delta',
      'text-delta',
      'tool-call-start',
      'tool-call-delta',
      'tool-call-delta',
      'tool-call-end',
      'finish',
    ]);
    assert.equal(end.response.content, 'Hi');
    assert.equal(end.response.reasoning, 'hmm');
    assert.deepEqual(end.response.toolCalls, [{ id: 'call_1', name: 'bash', arguments: '{"command":"ls"}' }]);
    assert.equal(end.response.finishReason, 'tool_calls');
    assert.deepEqual(end.tokens.promptTokenIds, [1, 2, 3]);
    assert.deepEqual(end.tokens.completionTokenIds, [10, 11, 12, 13, 14, 151645]);
    assert.deepEqual(end.tokens.completionLogprobs, [-0.1, -0.2, -0.3, -0.4, -0.5, -0.6]);
    assert.equal(parser.finished, true);
  });

  test('a bad chunk becomes a warning, never a throw', () => {
    const parser = new ChatStreamParser('r', 'm');
    parser.push({ choices: 'nope' });
    assert.equal(parser.warnings.length, 1);
    assert.equal(parser.end().response.content, '');
  });

  test('prompt ids that are not all integers: a warning, and no ids kept', () => {
    for (const ids of [
      [1, 2.5, 3],
      [1, '2', 3],
      [1, null],
      [1, [2]],
    ]) {
      const parser = new ChatStreamParser('r', 'm');
      parser.push({ prompt_token_ids: ids, choices: [] });
      assert.equal(parser.warnings.length, 1, JSON.stringify(ids));
      assert.equal(parser.end().tokens.promptTokenIds, null);
    }
    const parser = new ChatStreamParser('r', 'm');
    parser.push({ prompt_token_ids: [1, 2, 3], choices: [] });
    assert.deepEqual(parser.warnings, []);
    assert.deepEqual(parser.end().tokens.promptTokenIds, [1, 2, 3]);
  });

  test('SGLang-style non-streaming answer with meta_info logprobs', () => {
    const done = completionToEvents(
      {
        choices: [
          {
            message: { content: 'ok' },
            finish_reason: 'stop',
            prompt_token_ids: [5, 6],
            meta_info: {
              output_token_logprobs: [
                [-0.5, 7, 'ok'],
                [-0.1, 151645, ''],
              ],
            },
          },
        ],
      },
      'r',
      'm',
    )!;
    assert.deepEqual(done.tokens, {
      promptTokenIds: [5, 6],
      completionTokenIds: [7, 151645],
      completionLogprobs: [-0.5, -0.1],
    });
    assert.equal(done.response.content, 'ok');
  });
});

describe('openai-chat stream writer (what Pi accepts)', () => {
  test('tool call stream has the recorded sample event shape and reassembles', () => {
    const recorded = decodeSse(sample('pi-chat-1-first-request.json').response);
    const writer = createStreamWriter({ created: 1, includeUsage: true });
    const response = {
      id: 'chatcmpl_x',
      model: 'm',
      content: '',
      reasoning: '',
      toolCalls: [{ id: 'call_1', name: 'bash', arguments: '{"command":"echo hi"}' }],
      finishReason: 'tool_calls' as const,
      usage: { promptTokens: 10, completionTokens: 1 },
    };
    const text = [
      writer.write({ type: 'start', id: 'chatcmpl_x', model: 'm' }),
      writer.write({ type: 'tool-call-start', index: 0, id: 'call_1', name: 'bash' }),
      writer.write({ type: 'tool-call-delta', index: 0, arguments: '{"command":"echo hi"}' }),
      writer.write({ type: 'tool-call-end', index: 0 }),
      writer.write({ type: 'finish', response }),
    ].join('');
    const ours = decodeSse(text);
    assert.equal(ours.length, recorded.length, 'same number of chunks as the accepted sample');
    assert.equal(ours.at(-1)!.data, '[DONE]');
    const parsed = ours.slice(0, -1).map((e) => JSON.parse(e.data));
    const shape = (c: {
      choices: Array<{ delta: Record<string, unknown>; finish_reason: unknown }>;
      usage?: unknown;
    }) => ({
      keys: c.choices[0] ? Object.keys(c.choices[0].delta).sort() : [],
      finish: c.choices[0]?.finish_reason ?? null,
      usage: Boolean(c.usage),
    });
    const recordedShapes = recorded.slice(0, -1).map((e) => shape(JSON.parse(e.data)));
    assert.deepEqual(
      parsed.map(shape).map((s) => ({ ...s, keys: s.keys.filter((k) => k !== 'content') })),
      recordedShapes.map((s) => ({ ...s, keys: s.keys.filter((k) => k !== 'content') })),
    );
    // the harness-side reassembly gives back the call
    const reparser = new ChatStreamParser('x', 'm');
    for (const c of parsed) reparser.push(c);
    assert.deepEqual(reparser.end().response.toolCalls, response.toolCalls);
  });

  test('each chunk is the text JSON.stringify gives for the chunk object, byte for byte', () => {
    // (the writer writes a chunk's fixed head once per stream; this pins it to the object it stands for)
    const writer = createStreamWriter({ created: 1_700_000_000 });
    const id = 'chatcmpl_"q\\\u2028é';
    const model = 'org/model "β"';
    const events: StreamEvent[] = [
      { type: 'start', id, model },
      { type: 'reasoning-delta', text: 'think "a"\n' },
      { type: 'text-delta', text: 'é\u0000</script>' },
      { type: 'tool-call-start', index: 0, id: 'call_1', name: 'bash' },
      { type: 'tool-call-delta', index: 0, arguments: '{"command":"ls"}' },
      { type: 'tool-call-end', index: 0 },
    ];
    const ours = decodeSse(events.map((e) => writer.write(e)).join(''));
    const chunk = (delta: Record<string, unknown>) =>
      JSON.stringify({
        id,
        object: 'chat.completion.chunk',
        created: 1_700_000_000,
        model,
        choices: [{ index: 0, delta, finish_reason: null }],
      });
    assert.deepEqual(
      ours.map((e) => e.data),
      [
        chunk({ role: 'assistant', reasoning_content: 'think "a"\n' }),
        chunk({ content: 'é\u0000</script>' }),
        chunk({
          tool_calls: [
            { index: 0, id: 'call_1', type: 'function', function: { name: 'bash', arguments: '' } },
          ],
        }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"command":"ls"}' } }] }),
      ],
    );
    // a second stream's start gives its own head
    writer.write({ type: 'start', id: 'other', model: 'm2' });
    const next = JSON.parse(decodeSse(writer.write({ type: 'text-delta', text: 'x' }))[0]!.data);
    assert.equal(next.id, 'other');
    assert.equal(next.model, 'm2');
  });

  test('non-streaming render and error shape', () => {
    const body = renderResponse(
      {
        id: 'a',
        model: 'm',
        content: 'hi',
        reasoning: '',
        toolCalls: [],
        finishReason: 'length',
        usage: { promptTokens: 2, completionTokens: 3 },
      },
      { created: 5 },
    ) as {
      choices: Array<{ finish_reason: string; message: { content: string } }>;
      usage: { total_tokens: number };
    };
    assert.equal(body.choices[0]!.finish_reason, 'length');
    assert.equal(body.choices[0]!.message.content, 'hi');
    assert.equal(body.usage.total_tokens, 5);
    const err = renderError({ kind: 'backend_timeout', message: 'slow', status: 504 });
    assert.equal(err.status, 504);
    assert.deepEqual(err.body, {
      error: { message: 'slow', type: 'timeout_error', param: null, code: 'backend_timeout' },
    });
  });
});
