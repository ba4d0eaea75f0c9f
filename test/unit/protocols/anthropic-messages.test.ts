import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as anthropic from '../../../src/protocols/anthropic-messages/index.ts';
import {
  type AssistantMessage,
  type CanonicalResponse,
  fault,
  faultStatus,
  type ProxyFault,
  type StreamEvent,
} from '../../../src/protocols/canonical.ts';
import { ProtocolError } from '../../../src/protocols/errors.ts';
import { foldAnthropic } from './harness-fold.ts';
import {
  assertCovers,
  cannedResponse,
  type Event,
  events,
  eventsFor,
  loadSample,
} from './harness-samples.ts';

const SAMPLES = [
  'claude-1-first-request.json',
  'claude-2-after-tool.json',
  'claude-bare-request.json',
  'pi-anthropic-1-first-request.json',
  'pi-anthropic-2-after-tool.json',
];

const response = (over: Partial<CanonicalResponse> = {}): CanonicalResponse =>
  cannedResponse('msg_test', over);

function run(evts: StreamEvent[]): string {
  const writer = anthropic.createStreamWriter({ created: 1 });
  return evts.map((e) => writer.write(e)).join('');
}

const noPing = (evts: Event[]) => evts.filter((e) => e.type !== 'ping');

describe('anthropic-messages parseRequest on recorded requests', () => {
  test('every sample parses; tool results answer a tool call with the same id', () => {
    for (const name of SAMPLES) {
      const { value } = anthropic.parseRequest(loadSample(name).body);
      assert.equal(value.stream, true, name);
      const calls = new Map<string, string>();
      for (const m of value.messages) {
        if (m.role === 'assistant') for (const c of m.toolCalls) calls.set(c.id, c.name);
        if (m.role === 'tool')
          assert.equal(m.name, calls.get(m.toolCallId), `${name}: result for a known call`);
      }
    }
  });

  test('claude code first request: billing header dropped, mid-conversation system kept in place', () => {
    const { value, warnings } = anthropic.parseRequest(loadSample('claude-1-first-request.json').body);
    assert.deepEqual(
      value.messages.map((m) => m.role),
      ['system', 'user', 'system'],
    );
    const system = value.messages[0]!;
    assert.ok(system.role === 'system');
    assert.ok(
      system.content.startsWith(
        "You are a Claude agent, built on Anthropic's Claude Agent SDK.\n\n\nYou are an interactive agent",
      ),
    );
    assert.ok(!system.content.includes('x-anthropic-billing-header'));
    assert.ok(
      value.messages[2]!.role === 'system' && value.messages[2]!.content.startsWith('Available agent types'),
    );
    const user = value.messages[1]!;
    assert.ok(
      user.role === 'user' &&
        user.content.length === 2 &&
        user.content[1]?.type === 'text' &&
        user.content[1].text === 'Run echo hi',
    );
    assert.deepEqual(warnings, [
      'dropped system block x-anthropic-billing-header (per-version string, breaks prompt caching)',
    ]);
    assert.equal(value.tools.length, 24);
    assert.equal(value.maxTokens, 32000);
    assert.deepEqual(value.reasoning, { enabled: true, effort: 'high' });
  });

  test('claude code after tool: tool_use -> tool call, tool_result -> tool message', () => {
    const { value } = anthropic.parseRequest(loadSample('claude-2-after-tool.json').body);
    assert.deepEqual(
      value.messages.map((m) => m.role),
      ['system', 'user', 'system', 'assistant', 'tool'],
    );
    assert.deepEqual(value.messages.slice(3), [
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          {
            id: 'toolu_ef4cfc00d861ba16',
            name: 'Bash',
            arguments: '{"command":"echo hi","description":"Print hi"}',
          },
        ],
      },
      { role: 'tool', toolCallId: 'toolu_ef4cfc00d861ba16', name: 'Bash', content: 'hi' },
    ]);
  });

  test('pi: system blocks, max_tokens, tools', () => {
    const { value, warnings } = anthropic.parseRequest(loadSample('pi-anthropic-2-after-tool.json').body);
    assert.deepEqual(
      value.messages.map((m) => m.role),
      ['system', 'user', 'assistant', 'tool'],
    );
    assert.equal(value.maxTokens, 4096);
    assert.deepEqual(
      value.tools.map((t) => t.name),
      ['read', 'bash', 'edit', 'write'],
    );
    assert.equal(value.reasoning, undefined);
    assert.deepEqual(warnings, []);
  });

  test('the recorded body as stored (tools reduced to an object) is refused, naming the field', () => {
    assert.throws(
      () => anthropic.parseRequest(loadSample('claude-bare-request.json').rawBody),
      (e: unknown) => e instanceof ProtocolError && e.message === 'tools: expected array',
    );
  });
});

describe('anthropic-messages parseRequest', () => {
  test('tool results come first, in order; images, thinking, errors, dropped blocks and tools', () => {
    const { value, warnings } = anthropic.parseRequest({
      model: 'm',
      max_tokens: 10,
      system: 'sys',
      messages: [
        { role: 'user', content: 'go' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'plan', signature: 'sig9' },
            { type: 'redacted_thinking', data: 'xx' },
            { type: 'text', text: 'Running.' },
            { type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'ls' } },
            { type: 'tool_use', id: 't2', name: 'Read', input: { file_path: '/a' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'and also' },
            {
              type: 'tool_result',
              tool_use_id: 't1',
              content: [
                { type: 'text', text: 'a' },
                { type: 'text', text: 'b' },
              ],
            },
            { type: 'tool_result', tool_use_id: 't2', content: 'no such file', is_error: true },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
          ],
        },
      ],
      tools: [
        { name: 'Bash', input_schema: { type: 'object' } },
        { type: 'web_search_20250305', name: 'web_search' },
      ],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      thinking: { type: 'disabled' },
      stop_sequences: ['END'],
      temperature: 0.2,
      top_p: 0.8,
    });
    assert.deepEqual(value.messages, [
      { role: 'system', content: 'sys' },
      { role: 'user', content: [{ type: 'text', text: 'go' }] },
      {
        role: 'assistant',
        content: 'Running.',
        reasoning: 'plan',
        reasoningSignature: 'sig9',
        toolCalls: [
          { id: 't1', name: 'Bash', arguments: '{"command":"ls"}' },
          { id: 't2', name: 'Read', arguments: '{"file_path":"/a"}' },
        ],
      },
      { role: 'tool', toolCallId: 't1', name: 'Bash', content: 'a\nb' },
      { role: 'tool', toolCallId: 't2', name: 'Read', content: 'no such file', isError: true },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'and also' },
          { type: 'image', url: 'data:image/png;base64,AAAA' },
        ],
      },
    ]);
    assert.deepEqual(warnings, [
      'messages[1].content[1]: dropped content block of type redacted_thinking',
      'dropped tool type web_search_20250305',
    ]);
    assert.deepEqual(value.tools, [{ name: 'Bash', description: '', parameters: { type: 'object' } }]);
    assert.equal(value.toolChoice, 'required');
    assert.equal(value.parallelToolCalls, false);
    assert.deepEqual(value.reasoning, { enabled: false });
    assert.deepEqual(value.stop, ['END']);
    assert.equal(value.temperature, 0.2);
    assert.equal(value.topP, 0.8);
    assert.equal(value.stream, false);
  });

  test('count_tokens takes a body without max_tokens; messages requires it', () => {
    const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
    assert.equal(anthropic.parseCountTokensRequest(body).value.messages.length, 1);
    assert.deepEqual(anthropic.renderCountTokens(42), { input_tokens: 42 });
    assert.throws(
      () => anthropic.parseRequest(body),
      (e: unknown) => e instanceof ProtocolError && e.message === 'max_tokens: expected number',
    );
  });

  test('malformed bodies name the field', () => {
    const cases: [unknown, string][] = [
      ['nope', '(body): expected object'],
      [{ model: 'm', max_tokens: 1 }, 'messages: expected array'],
      [
        {
          model: 'm',
          max_tokens: 1,
          messages: [
            { role: 'user', content: 'a' },
            { role: 'assistant', content: [{ type: 'tool_use', id: 3, name: 'x', input: {} }] },
          ],
        },
        'messages[1].content[0].id: expected string',
      ],
      [
        { model: 'm', max_tokens: 1, messages: [{ role: 'tool', content: 'a' }] },
        'messages[0].role: expected one of "user", "assistant", "system"',
      ],
      [
        { model: 'm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'tool_result' }] }] },
        'messages[0].content[0].tool_use_id: expected string',
      ],
      [
        { model: 'm', max_tokens: 1, messages: [], tools: [{ description: 'x' }] },
        'tools[0].name: expected string',
      ],
    ];
    for (const [body, message] of cases) {
      assert.throws(
        () => anthropic.parseRequest(body),
        (e: unknown) => e instanceof ProtocolError && e.message === message && e.fault.status === 400,
        message,
      );
    }
  });
});

/** Canonical response read back from a recorded Anthropic stream. */
function responseFromRecorded(sse: string): CanonicalResponse {
  const { message } = foldAnthropic(events(sse));
  const content = message.content as Record<string, unknown>[];
  const usage = message.usage as { input_tokens: number; output_tokens: number };
  return response({
    id: message.id as string,
    content: content
      .filter((b) => b.type === 'text')
      .map((b) => b.text as string)
      .join(''),
    toolCalls: content
      .filter((b) => b.type === 'tool_use')
      .map((b) => ({ id: b.id as string, name: b.name as string, arguments: JSON.stringify(b.input) })),
    finishReason: message.stop_reason === 'tool_use' ? 'tool_calls' : 'stop',
    usage: { promptTokens: usage.input_tokens, completionTokens: usage.output_tokens },
  });
}

describe('anthropic-messages stream writer against recorded streams', () => {
  for (const name of SAMPLES) {
    test(`${name}: same event sequence and fields as the recorded response`, () => {
      const recorded = events(loadSample(name).response);
      const ours = events(run(eventsFor(responseFromRecorded(loadSample(name).response))));
      assert.deepEqual(
        noPing(ours).map((e) => e.type),
        noPing(recorded).map((e) => e.type),
      );
      assert.equal(ours.filter((e) => e.type === 'ping').length, 1, 'one ping');
      noPing(ours).forEach((e, i) => {
        assertCovers(e.data, noPing(recorded)[i]!.data, `${name} event ${i} ${e.type}`);
      });
      const a = foldAnthropic(ours).message;
      const b = foldAnthropic(recorded).message;
      assert.deepEqual(a.content, b.content);
      assert.equal(a.stop_reason, b.stop_reason);
      assert.equal(
        (a.usage as { input_tokens: number }).input_tokens,
        10,
        'real input_tokens reach the harness',
      );
    });
  }
});

describe('anthropic-messages stream writer', () => {
  test('thinking + text: signature_delta before the thinking block stops', () => {
    const r = response({ reasoning: 'Hmm.', content: 'Hi.', reasoningSignature: 'polar:sig' });
    const evts = events(run(eventsFor(r)));
    const deltas = evts
      .filter((e) => e.type === 'content_block_delta')
      .map((e) => (e.data.delta as { type: string }).type);
    assert.deepEqual(deltas, ['thinking_delta', 'signature_delta', 'text_delta']);
    const firstStop = evts.findIndex((e) => e.type === 'content_block_stop');
    const sig = evts.findIndex(
      (e) => (e.data.delta as { type?: string } | undefined)?.type === 'signature_delta',
    );
    assert.ok(sig < firstStop);
    const { message } = foldAnthropic(evts);
    assert.deepEqual(message.content, [
      { type: 'thinking', thinking: 'Hmm.', signature: 'polar:sig' },
      { type: 'text', text: 'Hi.' },
    ]);
    assert.equal(message.stop_reason, 'end_turn');
    assert.deepEqual(message.usage, {
      input_tokens: 10,
      output_tokens: 1,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    });
  });

  test('signature known only at finish is used when thinking is the open block', () => {
    const { message } = foldAnthropic(
      events(run(eventsFor(response({ reasoning: 'only', reasoningSignature: 'late' }), false))),
    );
    assert.deepEqual(message.content, [{ type: 'thinking', thinking: 'only', signature: 'late' }]);
  });

  test('parallel tool calls with interleaved deltas become sequential tool_use blocks', () => {
    const evts: StreamEvent[] = [
      { type: 'start', id: 'msg_p', model: 'm' },
      { type: 'text-delta', text: 'Two calls.' },
      { type: 'tool-call-start', index: 0, id: 'toolu_a', name: 'Bash' },
      { type: 'tool-call-start', index: 1, id: 'toolu_b', name: 'Read' },
      { type: 'tool-call-delta', index: 1, arguments: '{"file_path":"/x"}' },
      { type: 'tool-call-delta', index: 0, arguments: '{"command":' },
      { type: 'tool-call-delta', index: 0, arguments: '"ls"}' },
      { type: 'tool-call-end', index: 0 },
      { type: 'tool-call-end', index: 1 },
      {
        type: 'finish',
        response: response({ finishReason: 'tool_calls', usage: { promptTokens: 7, completionTokens: 20 } }),
      },
    ];
    const { message } = foldAnthropic(events(run(evts)));
    assert.deepEqual(message.content, [
      { type: 'text', text: 'Two calls.' },
      { type: 'tool_use', id: 'toolu_a', name: 'Bash', input: { command: 'ls' } },
      { type: 'tool_use', id: 'toolu_b', name: 'Read', input: { file_path: '/x' } },
    ]);
    assert.equal(message.stop_reason, 'tool_use');
    assert.equal((message.usage as { input_tokens: number }).input_tokens, 7);
  });

  test('length -> max_tokens; a stop sequence -> stop_sequence', () => {
    assert.equal(
      foldAnthropic(events(run(eventsFor(response({ content: 'x', finishReason: 'length' }))))).message
        .stop_reason,
      'max_tokens',
    );
    const m = foldAnthropic(events(run(eventsFor(response({ content: 'x', stopSequence: 'END' }))))).message;
    assert.equal(m.stop_reason, 'stop_sequence');
    assert.equal(m.stop_sequence, 'END');
  });

  test('an error mid-stream becomes event: error; later writes are ignored; odd orders never throw', () => {
    const writer = anthropic.createStreamWriter({ created: 1 });
    let sse = writer.write({ type: 'tool-call-delta', index: 3, arguments: 'x' });
    sse += writer.write({ type: 'text-delta', text: 'a' });
    sse += writer.write({ type: 'error', error: fault('backend_timeout', 'too slow') });
    assert.equal(writer.write({ type: 'finish', response: response() }), '');
    const evts = events(sse);
    assert.equal(evts[0]!.type, 'message_start');
    assert.deepEqual(evts.at(-1)!.data, {
      type: 'error',
      error: { type: 'timeout_error', message: 'too slow' },
    });
    assert.deepEqual(foldAnthropic(evts).error, { type: 'timeout_error', message: 'too slow' });
  });
});

describe('anthropic-messages round trip (rendered content fed back as history)', () => {
  const produced = response({
    reasoning: 'Check the dir.',
    reasoningSignature: 'polar:v1:xyz',
    content: 'Looking.',
    toolCalls: [
      { id: 'toolu_1', name: 'Bash', arguments: '{"command":"ls","description":"List"}' },
      { id: 'toolu_2', name: 'Read', arguments: '{"file_path":"/a"}' },
    ],
    finishReason: 'tool_calls',
  });
  const expected: AssistantMessage = {
    role: 'assistant',
    content: produced.content,
    reasoning: produced.reasoning,
    reasoningSignature: produced.reasoningSignature!,
    toolCalls: produced.toolCalls,
  };
  const next = (content: unknown) =>
    anthropic.parseRequest({
      model: 'm',
      max_tokens: 100,
      messages: [
        { role: 'user', content: 'list' },
        { role: 'assistant', content },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: 'a' },
            { type: 'tool_result', tool_use_id: 'toolu_2', content: 'b' },
          ],
        },
      ],
    }).value;

  test('non-streaming body', () => {
    const body = anthropic.renderResponse(produced, { created: 1 }) as Record<string, unknown>;
    assert.equal(body.type, 'message');
    assert.equal(body.stop_reason, 'tool_use');
    assert.equal(body.stop_sequence, null);
    assert.deepEqual(next(body.content).messages[1], expected);
  });

  test('streamed content blocks (what Claude Code appends to its history)', () => {
    const { message } = foldAnthropic(events(run(eventsFor(produced))));
    assert.deepEqual(next(message.content).messages[1], expected);
  });

  test('arguments that are not a JSON object render as input {}', () => {
    const body = anthropic.renderResponse(
      response({
        toolCalls: [{ id: 't', name: 'Bash', arguments: '{"command": ' }],
        finishReason: 'tool_calls',
      }),
      { created: 1 },
    ) as { content: unknown[] };
    assert.deepEqual(body.content, [{ type: 'tool_use', id: 't', name: 'Bash', input: {} }]);
  });
});

describe('anthropic-messages renderError', () => {
  test('every fault kind: status from the fault, Anthropic error shape', () => {
    const types: Record<ProxyFault['kind'], string> = {
      invalid_request: 'invalid_request_error',
      authentication: 'authentication_error',
      not_found: 'not_found_error',
      too_large: 'request_too_large',
      context_length_exceeded: 'invalid_request_error',
      backend_unreachable: 'api_error',
      backend_timeout: 'timeout_error',
      backend_error: 'api_error',
      backend_no_token_ids: 'api_error',
      overloaded: 'overloaded_error',
      internal: 'api_error',
    };
    for (const [kind, type] of Object.entries(types) as [ProxyFault['kind'], string][]) {
      const { status, body } = anthropic.renderError(fault(kind, `problem ${kind}`));
      assert.equal(status, faultStatus(kind));
      // Claude Code compacts on "prompt is too long", so a context fault always says it first
      const message =
        kind === 'context_length_exceeded' ? `prompt is too long: problem ${kind}` : `problem ${kind}`;
      assert.deepEqual(body, { type: 'error', error: { type, message } });
    }
    const own = anthropic.renderError(
      fault('context_length_exceeded', 'prompt is too long: 9 tokens > 8 maximum'),
    );
    assert.equal(
      (own.body as { error: { message: string } }).error.message,
      'prompt is too long: 9 tokens > 8 maximum',
    );
    assert.equal(anthropic.api, 'anthropic-messages');
    assert.equal(anthropic.mapFinishReason({ finishReason: 'content_filter' }), 'refusal');
  });
});
