/**
 * The Gemini API front (src/protocols/gemini): Gemini CLI's recorded requests (0.61.0, fixtures/samples)
 * to canonical form, and canonical answers back out as Gemini CLI folds them (geminiChat.ts: text parts
 * joined, thought parts aside, functionCall parts whole, finishReason and usageMetadata from the chunks).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type CanonicalResponse, fault, type StreamEvent } from '../../../src/protocols/canonical.ts';
import { ProtocolError } from '../../../src/protocols/errors.ts';
import { jsonSchemaOf } from '../../../src/protocols/gemini/convert-tools.ts';
import * as gemini from '../../../src/protocols/gemini/index.ts';
import { decodeSse } from '../../../src/protocols/sse.ts';
import { cannedResponse, eventsFor, loadSample } from './harness-samples.ts';

const STREAM = { path: '/v1beta/models/mock-model:streamGenerateContent?alt=sse' };
const PLAIN = { path: '/v1beta/models/mock-model:generateContent' };
const parse = (body: unknown, target = PLAIN) => gemini.parseRequest(body, target);
const user = (text: string) => ({ role: 'user', parts: [{ text }] });

type Part = Record<string, unknown>;
type Chunk = {
  candidates?: Array<{ content: { parts: Part[] }; finishReason?: string }>;
  usageMetadata?: unknown;
};

function run(evts: StreamEvent[]): Chunk[] {
  const writer = gemini.createStreamWriter({ created: 1 });
  return decodeSse(evts.map((e) => writer.write(e)).join('')).map((e) => {
    assert.equal(e.event, undefined, 'Gemini events are bare data: lines');
    return JSON.parse(e.data) as Chunk;
  });
}

/** what Gemini CLI keeps of a stream: text, thoughts, calls, the signatures, finish reason, usage */
function fold(chunks: Chunk[]) {
  const out = {
    text: '',
    thought: '',
    calls: [] as Part[],
    signatures: [] as unknown[],
    finish: '',
    usage: null as unknown,
  };
  for (const c of chunks) {
    for (const p of c.candidates?.[0]?.content.parts ?? []) {
      if (p.thoughtSignature) out.signatures.push(p.thoughtSignature);
      if (p.thought) out.thought += p.text as string;
      else if (typeof p.text === 'string') out.text += p.text;
      if (p.functionCall) out.calls.push(p.functionCall as Part);
    }
    if (c.candidates?.[0]?.finishReason) out.finish = c.candidates[0].finishReason;
    if (c.usageMetadata) out.usage = c.usageMetadata;
  }
  return out;
}

describe('gemini request conversion', () => {
  test("Gemini CLI's first request: system instruction, session context and prompt, tools, stream", () => {
    const { value, warnings } = gemini.parseRequest(loadSample('gemini-1-first-request.json').body, STREAM);
    assert.equal(value.model, 'mock-model');
    assert.equal(value.stream, true);
    assert.equal(value.messages[0]!.role, 'system');
    assert.match(value.messages[0]!.content as string, /^You are Gemini CLI/);
    const last = value.messages.at(-1)!;
    assert.ok(last.role === 'user');
    assert.deepEqual(
      last.content.map((p) => (p.type === 'text' ? p.text.slice(0, 17) : p.type)),
      ['<session_context>', 'ECHO polarbear'],
    );
    assert.ok(value.tools.some((t) => t.name === 'run_shell_command'));
    assert.deepEqual(value.tools.find((t) => t.name === 'run_shell_command')!.parameters.type, 'object');
    assert.equal(value.temperature, 1);
    assert.equal(value.topP, 0.95);
    assert.equal(value.reasoning, undefined, 'includeThoughts alone leaves thinking to the backend');
    assert.deepEqual(warnings, []);
  });

  test('after a tool: the call keeps its id and signature, the response answers it by id', () => {
    const { value } = gemini.parseRequest(loadSample('gemini-2-after-tool.json').body, STREAM);
    const assistant = value.messages.find((m) => m.role === 'assistant');
    const tool = value.messages.find((m) => m.role === 'tool');
    assert.ok(assistant?.role === 'assistant' && tool?.role === 'tool');
    assert.deepEqual(assistant.toolCalls, [
      { id: 'call_7f3a', name: 'run_shell_command', arguments: '{"command":"echo polarbear"}' },
    ]);
    assert.equal(assistant.reasoningSignature, 'polar.call_rec1');
    assert.equal(tool.toolCallId, 'call_7f3a');
    assert.equal(tool.name, 'run_shell_command');
    // `{output: text}` is the tool result's text itself
    assert.match(tool.content, /^<untrusted_context>\nOutput: polarbear\n/);
  });

  test('calls and responses without ids pair up by name; thoughts are reasoning; the synthetic signature is not a key', () => {
    const { value, warnings } = parse({
      contents: [
        user('go'),
        {
          role: 'model',
          parts: [
            { text: 'Plan.', thought: true },
            { text: 'Running both.' },
            {
              functionCall: { name: 'a', args: { x: 1 } },
              thoughtSignature: 'skip_thought_signature_validator',
            },
            { functionCall: { name: 'b' } },
            { executableCode: { code: 'print(1)' } },
          ],
        },
        {
          role: 'user',
          parts: [
            { functionResponse: { name: 'b', response: { error: 'no such file' } } },
            { functionResponse: { name: 'a', response: { output: 'one', extra: true } } },
            { inlineData: { mimeType: 'image/png', data: 'AAAA' } },
            { inlineData: { mimeType: 'application/pdf', data: 'AAAA' } },
          ],
        },
      ],
    });
    const [, a, r1, r2, u] = value.messages;
    assert.ok(a?.role === 'assistant' && r1?.role === 'tool' && r2?.role === 'tool' && u?.role === 'user');
    assert.equal(a.reasoning, 'Plan.');
    assert.equal(a.content, 'Running both.');
    assert.equal(a.reasoningSignature, undefined);
    assert.deepEqual(
      a.toolCalls.map((c) => [c.id, c.name, c.arguments]),
      [
        ['a_1_2', 'a', '{"x":1}'],
        ['b_1_3', 'b', '{}'],
      ],
    );
    assert.deepEqual([r1.toolCallId, r1.content, r1.isError], ['b_1_3', 'no such file', true]);
    assert.deepEqual([r2.toolCallId, r2.content], ['a_1_2', '{"output":"one","extra":true}']);
    assert.deepEqual(u.content, [{ type: 'image', url: 'data:image/png;base64,AAAA' }]);
    assert.deepEqual(warnings, [
      'contents[1].parts[4]: dropped executableCode part of a model turn',
      'contents[2].parts[3]: dropped inlineData part of a user turn',
    ]);
  });

  test('tools: Schema type names become JSON Schema, Google-run tools are dropped, toolConfig modes', () => {
    const schema = {
      type: 'OBJECT',
      properties: { n: { type: 'INTEGER' }, l: { type: 'ARRAY', items: { type: 'STRING' } } },
    };
    assert.deepEqual(jsonSchemaOf(schema), {
      type: 'object',
      properties: { n: { type: 'integer' }, l: { type: 'array', items: { type: 'string' } } },
    });
    const body = (toolConfig?: unknown) => ({
      contents: [user('x')],
      tools: [
        { functionDeclarations: [{ name: 'f', parameters: schema }, { name: 'g' }] },
        { googleSearch: {} },
      ],
      ...(toolConfig ? { toolConfig } : {}),
    });
    const { value, warnings } = parse(body());
    assert.deepEqual(
      value.tools.map((t) => [t.name, t.parameters.type]),
      [
        ['f', 'object'],
        ['g', 'object'],
      ],
    );
    assert.deepEqual(warnings, ["dropped tool googleSearch (runs on Google's servers)"]);
    const mode = (c: unknown) => parse(body({ functionCallingConfig: c })).value.toolChoice;
    assert.equal(mode({ mode: 'AUTO' }), 'auto');
    assert.equal(mode({ mode: 'NONE' }), 'none');
    assert.equal(mode({ mode: 'ANY' }), 'required');
    assert.deepEqual(mode({ mode: 'ANY', allowedFunctionNames: ['f'] }), { name: 'f' });
    assert.equal(mode({ mode: 'VALIDATED' }), 'auto');
  });

  test('generationConfig: limits, stops, thinking budget and level; what polar cannot do is a warning', () => {
    const { value, warnings } = parse({
      contents: [user('x')],
      systemInstruction: { text: 'a bare part' },
      generationConfig: {
        maxOutputTokens: 64,
        stopSequences: ['END'],
        candidateCount: 2,
        responseMimeType: 'application/json',
        responseJsonSchema: { type: 'object' },
        thinkingConfig: { thinkingBudget: 0 },
      },
      cachedContent: 'cachedContents/abc',
    });
    assert.equal(value.messages[0]!.content, 'a bare part');
    assert.equal(value.maxTokens, 64);
    assert.deepEqual(value.stop, ['END']);
    assert.deepEqual(value.reasoning, { enabled: false });
    assert.equal(warnings.length, 3);
    const level = parse({
      contents: [user('x')],
      generationConfig: { thinkingConfig: { thinkingLevel: 'HIGH' } },
    });
    assert.deepEqual(level.value.reasoning, { effort: 'high' });
  });

  test('the path names the model and the method; bodies name the bad field', () => {
    assert.deepEqual(gemini.parseTarget('/v1beta/models/Qwen/Qwen3-4B:streamGenerateContent?alt=sse'), {
      model: 'Qwen/Qwen3-4B',
      method: 'streamGenerateContent',
      sse: true,
    });
    assert.equal(gemini.parseTarget('/v1/models/qwen3:8b:generateContent').model, 'qwen3:8b');
    assert.equal(gemini.parseTarget('/models/m%2Fx:countTokens').model, 'm/x');
    assert.throws(() => gemini.parseTarget('/v1beta/models/m:streamGenerateContent'), /alt=sse/);
    assert.throws(() => gemini.parseTarget('/v1beta/models/m:embedContent'), ProtocolError);
    assert.throws(
      () => parse({ contents: [{ role: 'model', parts: [{ functionCall: { args: {} } }] }] }),
      (e: unknown) =>
        e instanceof ProtocolError && /contents\[0\]\.parts\[0\]\.functionCall\.name/.test(e.message),
    );
    assert.throws(() => parse({ contents: 'hi' }), /contents: expected array/);
  });

  test('countTokens takes contents or a whole generateContentRequest', () => {
    const target = { path: '/v1beta/models/m:countTokens' };
    const a = gemini.parseCountTokensRequest({ contents: [user('x')] }, target).value;
    const b = gemini.parseCountTokensRequest(
      { generateContentRequest: { model: 'models/m', contents: [user('x')], systemInstruction: 'S' } },
      target,
    ).value;
    assert.equal(a.messages.length, 1);
    assert.equal(b.messages[0]!.role, 'system');
    assert.deepEqual(gemini.renderCountTokens(7), { totalTokens: 7 });
  });
});

describe('gemini responses and streams', () => {
  const call = { id: 'call_1', name: 'run_shell_command', arguments: '{"command":"ls"}' };
  const response = (over: Partial<CanonicalResponse> = {}) =>
    cannedResponse('resp_1', { reasoningSignature: 'polar.call_x', ...over });

  test('a whole response: thought part, then the answer with the signature on its first part', () => {
    const body = gemini.renderResponse(
      response({ reasoning: 'Think.', content: 'Hi.', toolCalls: [call], finishReason: 'tool_calls' }),
      { created: 1 },
    ) as Chunk;
    assert.deepEqual(body.candidates![0]!.content.parts, [
      { text: 'Think.', thought: true },
      { text: 'Hi.', thoughtSignature: 'polar.call_x' },
      { functionCall: { id: 'call_1', name: 'run_shell_command', args: { command: 'ls' } } },
    ]);
    assert.equal(body.candidates![0]!.finishReason, 'STOP', 'a turn ending in calls is STOP');
    assert.deepEqual(body.usageMetadata, {
      promptTokenCount: 10,
      candidatesTokenCount: 1,
      totalTokenCount: 11,
    });
  });

  test('a stream folds back to the same turn; calls go out whole with object args', () => {
    const r = response({
      reasoning: 'Think.',
      content: 'Running.',
      toolCalls: [call],
      finishReason: 'tool_calls',
    });
    const f = fold(run(eventsFor(r)));
    assert.equal(f.thought, 'Think.');
    assert.equal(f.text, 'Running.');
    assert.deepEqual(f.calls, [{ id: 'call_1', name: 'run_shell_command', args: { command: 'ls' } }]);
    assert.deepEqual(f.signatures, ['polar.call_x'], 'one signature, on the first kept part');
    assert.equal(f.finish, 'STOP');
    assert.deepEqual(f.usage, { promptTokenCount: 10, candidatesTokenCount: 1, totalTokenCount: 11 });
  });

  test('a call-only turn carries the signature on its functionCall; an empty answer on an empty text', () => {
    const calls = fold(run(eventsFor(response({ toolCalls: [call], finishReason: 'tool_calls' }))));
    assert.deepEqual(calls.signatures, ['polar.call_x']);
    const chunks = run(eventsFor(response()));
    assert.deepEqual(chunks.at(-1)!.candidates![0]!.content.parts, [
      { text: '', thoughtSignature: 'polar.call_x' },
    ]);
  });

  test('finish reasons map to Gemini', () => {
    assert.equal(gemini.mapFinishReason('length'), 'MAX_TOKENS');
    assert.equal(gemini.mapFinishReason('content_filter'), 'SAFETY');
    assert.equal(gemini.mapFinishReason('error'), 'OTHER');
  });

  test("errors are Google's {error: {code, message, status}}, mid-stream too, and end the stream", () => {
    const f = fault('backend_unreachable', 'backend down');
    assert.deepEqual(gemini.renderError(f), {
      status: 502,
      body: { error: { code: 502, message: 'backend down', status: 'UNAVAILABLE' } },
    });
    assert.equal(
      (gemini.renderError(fault('invalid_request', 'x')).body as { error: { status: string } }).error.status,
      'INVALID_ARGUMENT',
    );
    const writer = gemini.createStreamWriter({ created: 1 });
    writer.write({ type: 'start', id: 'r', model: 'm' });
    writer.write({ type: 'text-delta', text: 'par' });
    const err = decodeSse(writer.write({ type: 'error', error: fault('backend_timeout', 'slow') }));
    assert.deepEqual(JSON.parse(err[0]!.data), {
      error: { code: 504, message: 'slow', status: 'DEADLINE_EXCEEDED' },
    });
    assert.equal(writer.write({ type: 'text-delta', text: 'more' }), '', 'nothing after the end');
  });

  test('the model list names the served model', () => {
    const list = gemini.renderModelList('Qwen/Qwen3-4B') as {
      models: Array<{ name: string; supportedGenerationMethods: string[] }>;
    };
    assert.equal(list.models[0]!.name, 'models/Qwen/Qwen3-4B');
    assert.ok(list.models[0]!.supportedGenerationMethods.includes('streamGenerateContent'));
  });
});
