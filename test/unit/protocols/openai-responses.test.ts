import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type AssistantMessage,
  type CanonicalResponse,
  fault,
  faultStatus,
  type ProxyFault,
  type StreamEvent,
} from '../../../src/protocols/canonical.ts';
import { ProtocolError } from '../../../src/protocols/errors.ts';
import * as responses from '../../../src/protocols/openai-responses/index.ts';
import { foldResponses } from './harness-fold.ts';
import { assertCovers, cannedResponse, events, eventsFor, loadSample } from './harness-samples.ts';

const SAMPLES = [
  'codex-1-first-request.json',
  'codex-2-after-tool.json',
  'codex-3-compaction-request.json',
  'pi-responses-1-first-request.json',
  'pi-responses-2-after-tool.json',
];

const response = (over: Partial<CanonicalResponse> = {}): CanonicalResponse =>
  cannedResponse('resp_test', over);

function run(evts: StreamEvent[]): string {
  const writer = responses.createStreamWriter({ created: 1796105560 });
  return evts.map((e) => writer.write(e)).join('');
}

describe('openai-responses parseRequest on recorded requests', () => {
  test('every sample parses; tool results answer a tool call with the same id', () => {
    for (const name of SAMPLES) {
      const { value } = responses.parseRequest(loadSample(name).body);
      assert.equal(value.model, 'mock-model', name);
      assert.equal(value.stream, true, name);
      const calls = new Map<string, string>();
      for (const m of value.messages) {
        if (m.role === 'assistant') for (const c of m.toolCalls) calls.set(c.id, c.name);
        if (m.role === 'tool')
          assert.equal(m.name, calls.get(m.toolCallId), `${name}: result for a known call`);
      }
    }
  });

  test('codex first request: developer -> system, namespace flattened, web_search dropped', () => {
    const { value, warnings } = responses.parseRequest(loadSample('codex-1-first-request.json').body);
    assert.deepEqual(
      value.messages.map((m) => m.role),
      ['system', 'system', 'user', 'user'],
    );
    const second = value.messages[1]!;
    assert.ok(second.role === 'system' && /\n\n<permissions instructions>/.test(second.content));
    const last = value.messages[3]!;
    assert.deepEqual(last, { role: 'user', content: [{ type: 'text', text: 'Run echo hi' }] });
    const names = value.tools.map((t) => t.name);
    assert.equal(names.length, 12);
    assert.ok(names.includes('exec_command'));
    assert.ok(names.includes('multi_agent_v1.spawn_agent'));
    assert.ok(!names.includes('multi_agent_v1'));
    assert.deepEqual(warnings, ['dropped tool type web_search']);
    assert.equal(value.toolChoice, 'auto');
    assert.equal(value.parallelToolCalls, true);
    assert.equal(value.reasoning, undefined, 'summary alone asks for nothing');
  });

  test('codex after tool: function_call folds into an assistant turn, output becomes a tool message', () => {
    const { value } = responses.parseRequest(loadSample('codex-2-after-tool.json').body);
    assert.deepEqual(value.messages.slice(4), [
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ id: 'call_c274697a027a29c2', name: 'exec_command', arguments: '{"cmd":"echo hi"}' }],
      },
      {
        role: 'tool',
        toolCallId: 'call_c274697a027a29c2',
        name: 'exec_command',
        content:
          'Chunk ID: f15881\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 1\nOutput:\nhi\n',
      },
    ]);
  });

  test('codex compaction and pi requests', () => {
    const compaction = responses.parseRequest(loadSample('codex-3-compaction-request.json').body).value;
    assert.deepEqual(compaction.tools, []);
    assert.equal(compaction.parallelToolCalls, false);
    const tail = compaction.messages.at(-1)!;
    assert.ok(
      tail.role === 'user' &&
        tail.content[0]?.type === 'text' &&
        tail.content[0].text.includes('CONTEXT CHECKPOINT COMPACTION'),
    );
    const pi = responses.parseRequest(loadSample('pi-responses-2-after-tool.json').body).value;
    assert.deepEqual(
      pi.messages.map((m) => m.role),
      ['system', 'user', 'assistant', 'tool'],
    );
    assert.equal(pi.maxTokens, 4096);
    assert.deepEqual(
      pi.tools.map((t) => t.name),
      ['read', 'bash', 'edit', 'write'],
    );
    assert.deepEqual(pi.tools[1]!.parameters, {
      type: 'object',
      properties: { command: { type: 'string' }, timeout: { type: 'string' } },
    });
  });

  test('the recorded body as stored (tools reduced to an object) is refused, naming the field', () => {
    assert.throws(
      () => responses.parseRequest(loadSample('codex-1-first-request.json').rawBody),
      (e: unknown) =>
        e instanceof ProtocolError && e.message === 'tools: expected array' && e.fault.status === 400,
    );
  });
});

describe('openai-responses parseRequest', () => {
  test('reasoning items attach to the following assistant turn; assistant message + calls fold', () => {
    const { value, warnings } = responses.parseRequest({
      model: 'm',
      instructions: 'be brief',
      input: [
        { type: 'message', role: 'user', content: 'hi' },
        {
          type: 'reasoning',
          id: 'rs_1',
          summary: [{ type: 'summary_text', text: 'think' }],
          encrypted_content: 'sig1',
        },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'calling' }] },
        {
          type: 'function_call',
          call_id: 'c1',
          name: 'spawn_agent',
          namespace: 'multi_agent_v1',
          arguments: '{}',
        },
        { type: 'function_call', call_id: 'c2', name: 'read', arguments: '{"path":"a"}' },
        { type: 'function_call_output', call_id: 'c2', output: [{ type: 'input_text', text: 'A' }] },
        { type: 'function_call_output', call_id: 'c1', output: 'ok' },
        { type: 'custom_tool_call', call_id: 'c3', name: 'apply_patch', input: '*** Begin Patch' },
        { type: 'custom_tool_call_output', call_id: 'c3', output: 'done' },
        { type: 'web_search_call', id: 'ws_1' },
      ],
      max_output_tokens: 100,
      temperature: 0.5,
      top_p: 0.9,
      tool_choice: { type: 'function', name: 'read' },
      reasoning: { effort: 'high' },
      previous_response_id: 'resp_0',
    });
    assert.deepEqual(
      value.messages.map((m) => m.role),
      ['system', 'user', 'assistant', 'tool', 'tool', 'assistant', 'tool'],
    );
    assert.deepEqual(value.messages[2], {
      role: 'assistant',
      content: 'calling',
      reasoning: 'think',
      reasoningSignature: 'sig1',
      toolCalls: [
        { id: 'c1', name: 'multi_agent_v1.spawn_agent', arguments: '{}' },
        { id: 'c2', name: 'read', arguments: '{"path":"a"}' },
      ],
    });
    assert.deepEqual(value.messages[3], { role: 'tool', toolCallId: 'c2', name: 'read', content: 'A' });
    assert.deepEqual(value.messages[5], {
      role: 'assistant',
      content: '',
      toolCalls: [{ id: 'c3', name: 'apply_patch', arguments: '{"input":"*** Begin Patch"}' }],
    });
    assert.equal(value.maxTokens, 100);
    assert.equal(value.temperature, 0.5);
    assert.equal(value.topP, 0.9);
    assert.deepEqual(value.toolChoice, { name: 'read' });
    assert.deepEqual(value.reasoning, { effort: 'high' });
    assert.equal(value.stream, false);
    assert.ok(value.messages[0]!.role === 'system' && value.messages[0]!.content === 'be brief');
    assert.deepEqual(warnings, [
      'input[7]: custom_tool_call apply_patch represented as a function call with arguments {input}',
      'input[9]: dropped item type web_search_call',
      'previous_response_id ignored: the proxy is stateless, the harness must resend the history',
    ]);
  });

  test('a string input is one user message', () => {
    const { value } = responses.parseRequest({ model: 'm', input: 'hello', stream: true });
    assert.deepEqual(value.messages, [{ role: 'user', content: [{ type: 'text', text: 'hello' }] }]);
  });

  test('malformed bodies name the field', () => {
    const cases: [unknown, string][] = [
      [null, '(body): expected object'],
      [{ input: [] }, 'model: expected string'],
      [
        { model: 'm', input: [{}, {}, {}, { type: 'function_call', call_id: 7, name: 'x', arguments: '' }] },
        'input[3].call_id: expected string',
      ],
      [
        { model: 'm', input: [{ type: 'message', role: 'robot', content: 'x' }] },
        'input[0].role: expected one of "user", "assistant", "system", "developer"',
      ],
      [{ model: 'm', input: [], tools: [{ type: 'function' }] }, 'tools[0].name: expected string'],
      [{ model: 'm', max_output_tokens: 'many' }, 'max_output_tokens: expected number'],
    ];
    for (const [body, message] of cases) {
      assert.throws(
        () => responses.parseRequest(body),
        (e: unknown) =>
          e instanceof ProtocolError && e.message === message && e.fault.kind === 'invalid_request',
        message,
      );
    }
  });
});

/** Canonical response read back from a recorded Responses stream (text and function calls). */
function responseFromRecorded(sse: string): CanonicalResponse {
  const { final } = foldResponses(events(sse));
  const output = final.output as Record<string, unknown>[];
  const usage = final.usage as { input_tokens: number; output_tokens: number };
  return response({
    id: final.id as string,
    content: output
      .filter((i) => i.type === 'message')
      .map((i) => ((i.content as { text: string }[])[0] as { text: string }).text)
      .join(''),
    toolCalls: output
      .filter((i) => i.type === 'function_call')
      .map((i) => ({ id: i.call_id as string, name: i.name as string, arguments: i.arguments as string })),
    finishReason: output.some((i) => i.type === 'function_call') ? 'tool_calls' : 'stop',
    usage: { promptTokens: usage.input_tokens, completionTokens: usage.output_tokens },
  });
}

describe('openai-responses stream writer against recorded streams', () => {
  for (const name of SAMPLES) {
    test(`${name}: same event sequence and fields as the recorded response`, () => {
      const recorded = events(loadSample(name).response);
      const canonical = responseFromRecorded(loadSample(name).response);
      const ours = events(run(eventsFor(canonical)));
      assert.deepEqual(
        ours.map((e) => e.type),
        recorded.map((e) => e.type),
      );
      ours.forEach((e, i) => {
        assertCovers(e.data, recorded[i]!.data, `${name} event ${i} ${e.type}`);
      });
      const folded = foldResponses(ours);
      const again = foldResponses(recorded);
      const strip = (items: Record<string, unknown>[]) => items.map(({ id: _id, ...rest }) => rest);
      assert.deepEqual(strip(folded.done), strip(again.done), 'harness keeps the same items');
      assert.deepEqual(folded.final.usage, again.final.usage);
    });
  }
});

describe('openai-responses stream writer', () => {
  test('reasoning + text: a reasoning item with summary events, its signature from the start event', () => {
    const r = response({ reasoning: 'Let me think.', content: 'Hello!', reasoningSignature: 'polar:sig:1' });
    const evts = events(run(eventsFor(r)));
    assert.deepEqual(
      evts.map((e) => e.type),
      [
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.reasoning_summary_part.added',
        'response.reasoning_summary_text.delta',
        'response.reasoning_summary_text.done',
        'response.reasoning_summary_part.done',
        'response.output_item.done',
        'response.output_item.added',
        'response.content_part.added',
        'response.output_text.delta',
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ],
    );
    const { done, final } = foldResponses(evts);
    assert.deepEqual(done[0], {
      type: 'reasoning',
      id: done[0]!.id,
      summary: [{ type: 'summary_text', text: 'Let me think.' }],
      encrypted_content: 'polar:sig:1',
    });
    assert.equal(((done[1]!.content as { text: string }[])[0] as { text: string }).text, 'Hello!');
    assert.deepEqual(final.output, done);
  });

  test('signature known only at finish still reaches the reasoning item when it is open at finish', () => {
    const r = response({ reasoning: 'thinking only', reasoningSignature: 'late' });
    const { done } = foldResponses(events(run(eventsFor(r, false))));
    assert.equal(done[0]!.encrypted_content, 'late');
  });

  test('parallel tool calls with interleaved deltas come out as whole, ordered function_call items', () => {
    const evts: StreamEvent[] = [
      { type: 'start', id: 'resp_p', model: 'm' },
      { type: 'tool-call-start', index: 0, id: 'call_a', name: 'exec_command' },
      { type: 'tool-call-delta', index: 0, arguments: '{"cmd":' },
      { type: 'tool-call-start', index: 1, id: 'call_b', name: 'multi_agent_v1.spawn_agent' },
      { type: 'tool-call-delta', index: 1, arguments: '{"prompt":"x"}' },
      { type: 'tool-call-delta', index: 0, arguments: '"ls"}' },
      { type: 'tool-call-end', index: 1 },
      { type: 'tool-call-end', index: 0 },
      {
        type: 'finish',
        response: response({
          finishReason: 'tool_calls',
          toolCalls: [
            { id: 'call_a', name: 'exec_command', arguments: '{"cmd":"ls"}' },
            { id: 'call_b', name: 'multi_agent_v1.spawn_agent', arguments: '{"prompt":"x"}' },
          ],
        }),
      },
    ];
    const { done, finalType, final } = foldResponses(events(run(evts)));
    assert.equal(finalType, 'response.completed');
    assert.deepEqual(
      done.map(({ id: _id, ...rest }) => rest),
      [
        {
          type: 'function_call',
          call_id: 'call_a',
          name: 'exec_command',
          arguments: '{"cmd":"ls"}',
          status: 'completed',
        },
        {
          type: 'function_call',
          call_id: 'call_b',
          name: 'spawn_agent',
          namespace: 'multi_agent_v1',
          arguments: '{"prompt":"x"}',
          status: 'completed',
        },
      ],
    );
    assert.deepEqual(final.usage, {
      input_tokens: 10,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 1,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 11,
    });
  });

  test('length ends with response.incomplete; a call never ended is closed at finish', () => {
    const evts: StreamEvent[] = [
      { type: 'start', id: 'resp_l', model: 'm' },
      { type: 'text-delta', text: 'partial' },
      { type: 'tool-call-start', index: 0, id: 'call_x', name: 'read' },
      { type: 'tool-call-delta', index: 0, arguments: '{"pa' },
      { type: 'finish', response: response({ finishReason: 'length', content: 'partial' }) },
    ];
    const { done, finalType, final } = foldResponses(events(run(evts)));
    assert.equal(finalType, 'response.incomplete');
    assert.equal(final.status, 'incomplete');
    assert.deepEqual(final.incomplete_details, { reason: 'max_output_tokens' });
    assert.deepEqual(
      done.map((i) => i.type),
      ['message', 'function_call'],
    );
    assert.equal(done[1]!.arguments, '{"pa');
  });

  test('an error mid-stream becomes response.failed; later writes are ignored', () => {
    const writer = responses.createStreamWriter({ created: 1 });
    let sse = writer.write({ type: 'start', id: 'resp_e', model: 'm' });
    sse += writer.write({ type: 'text-delta', text: 'hal' });
    sse += writer.write({ type: 'error', error: fault('backend_unreachable', 'connection refused') });
    assert.equal(writer.write({ type: 'text-delta', text: 'f' }), '');
    assert.equal(writer.write({ type: 'finish', response: response() }), '');
    const evts = events(sse);
    const last = evts.at(-1)!;
    assert.equal(last.type, 'response.failed');
    const r = last.data.response as { status: string; error: unknown };
    assert.equal(r.status, 'failed');
    assert.deepEqual(r.error, { code: 'backend_unreachable', message: 'connection refused' });
  });

  test('never throws on odd event orders; a stream without start still opens with response.created', () => {
    const writer = responses.createStreamWriter({ created: 1 });
    const odd: StreamEvent[] = [
      { type: 'tool-call-delta', index: 5, arguments: 'x' },
      { type: 'tool-call-end', index: 9 },
      { type: 'text-delta', text: 'a' },
      { type: 'finish', response: response({ content: 'a' }) },
    ];
    const evts = events(odd.map((e) => writer.write(e)).join(''));
    assert.equal(evts[0]!.type, 'response.created');
    assert.equal(foldResponses(evts).finalType, 'response.completed');
  });
});

describe('openai-responses round trip (rendered output fed back as history)', () => {
  const produced = response({
    reasoning: 'I should list files.',
    reasoningSignature: 'polar:v1:abc',
    content: 'Listing.',
    toolCalls: [
      { id: 'call_1', name: 'exec_command', arguments: '{"cmd":"ls"}' },
      { id: 'call_2', name: 'multi_agent_v1.wait_agent', arguments: '{"ids":["a"]}' },
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

  function nextRequest(output: unknown[]) {
    const base = loadSample('codex-2-after-tool.json').body as { input: unknown[] };
    const input = [
      ...base.input.slice(0, 4),
      ...output,
      { type: 'function_call_output', call_id: 'call_1', output: 'a\nb\n' },
      { type: 'function_call_output', call_id: 'call_2', output: 'done' },
    ];
    return responses.parseRequest({ ...base, input }).value;
  }

  test('non-streaming body', () => {
    const body = responses.renderResponse(produced, { created: 1 }) as { output: unknown[]; status: string };
    assert.equal(body.status, 'completed');
    const req = nextRequest(body.output);
    assert.deepEqual(req.messages[4], expected);
    assert.deepEqual(
      req.messages.slice(5).map((m) => m.role === 'tool' && m.name),
      ['exec_command', 'multi_agent_v1.wait_agent'],
    );
  });

  test('streamed output_item.done items (what Codex appends to its history)', () => {
    const { done } = foldResponses(events(run(eventsFor(produced))));
    assert.deepEqual(nextRequest(done).messages[4], expected);
  });
});

describe('openai-responses renderResponse and renderError', () => {
  test('length renders as incomplete with max_output_tokens', () => {
    const body = responses.renderResponse(response({ content: 'cut', finishReason: 'length' }), {
      created: 5,
    }) as Record<string, unknown>;
    assert.equal(body.object, 'response');
    assert.equal(body.created_at, 5);
    assert.equal(body.status, 'incomplete');
    assert.deepEqual(body.incomplete_details, { reason: 'max_output_tokens' });
    assert.deepEqual(responses.mapFinishReason('tool_calls'), { status: 'completed' });
  });

  test('every fault kind: status from the fault, OpenAI error shape', () => {
    const types: Record<ProxyFault['kind'], string> = {
      invalid_request: 'invalid_request_error',
      authentication: 'authentication_error',
      not_found: 'not_found_error',
      too_large: 'invalid_request_error',
      context_length_exceeded: 'invalid_request_error',
      backend_unreachable: 'server_error',
      backend_timeout: 'timeout_error',
      backend_error: 'server_error',
      backend_no_token_ids: 'server_error',
      overloaded: 'server_error',
      internal: 'server_error',
    };
    for (const [kind, type] of Object.entries(types) as [ProxyFault['kind'], string][]) {
      const { status, body } = responses.renderError(fault(kind, `problem ${kind}`));
      assert.equal(status, faultStatus(kind));
      // OpenAI's own code for a prompt over the context window, with the param it names
      const param = kind === 'context_length_exceeded' ? 'messages' : null;
      assert.deepEqual(body, { error: { message: `problem ${kind}`, type, param, code: kind } });
    }
    assert.equal(responses.api, 'openai-responses');
  });
});
