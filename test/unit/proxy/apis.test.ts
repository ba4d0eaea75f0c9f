/** Each front-end API through the real proxy and the vLLM stand-in, streaming and not. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeSse } from '../../../src/protocols/sse.ts';
import { post, startProxy, type TestProxy } from '../../support/proxy-harness.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

const tools = {
  chat: [
    {
      type: 'function',
      function: {
        name: 'bash',
        description: 'run',
        parameters: { type: 'object', properties: { command: { type: 'string' } } },
      },
    },
  ],
  responses: [
    {
      type: 'function',
      name: 'bash',
      description: 'run',
      parameters: { type: 'object', properties: { command: { type: 'string' } } },
    },
  ],
  anthropic: [
    {
      name: 'bash',
      description: 'run',
      input_schema: { type: 'object', properties: { command: { type: 'string' } } },
    },
  ],
  gemini: [
    {
      functionDeclarations: [
        {
          name: 'bash',
          description: 'run',
          parametersJsonSchema: { type: 'object', properties: { command: { type: 'string' } } },
        },
      ],
    },
  ],
};

describe('front-end APIs through the proxy', () => {
  let standin: Standin;
  let p: TestProxy;
  const auth = () => ({ authorization: `Bearer ${p.key}` });
  before(async () => {
    standin = await startStandin();
    p = await startProxy({ url: standin.url });
  });
  after(async () => {
    await p.close();
    await standin.close();
  });

  test('chat completions, non-streaming tool call', async () => {
    const r = await post(
      p.url,
      '/v1/chat/completions',
      { model: 'x', messages: [{ role: 'user', content: 'ECHO hi' }], tools: tools.chat },
      auth(),
    );
    assert.equal(r.status, 200);
    const body = (await r.json()) as {
      choices: Array<{
        finish_reason: string;
        message: { tool_calls: Array<{ function: { name: string; arguments: string } }> };
      }>;
    };
    assert.equal(body.choices[0]!.finish_reason, 'tool_calls');
    assert.deepEqual(JSON.parse(body.choices[0]!.message.tool_calls[0]!.function.arguments), {
      command: 'echo hi',
    });
    const rec = (await p.records()).at(-1)!;
    assert.equal(rec.stream, false);
    assert.equal(rec.token_exact, true);
    assert.equal(rec.finish_reason, 'tool_calls');
  });

  test('responses, non-streaming and streaming', async () => {
    const r = await post(p.url, '/v1/responses', { model: 'x', input: 'Say hi' }, auth());
    assert.equal(r.status, 200);
    const body = (await r.json()) as {
      object: string;
      status: string;
      output: Array<{ type: string; content?: Array<{ text: string }> }>;
    };
    assert.equal(body.object, 'response');
    assert.equal(body.status, 'completed');
    const message = body.output.find((o) => o.type === 'message');
    assert.equal(message?.content?.[0]?.text, 'Hello from the stand-in.');
    assert.ok(
      body.output.some((o) => o.type === 'reasoning'),
      'reasoning item returned',
    );

    const s = await post(
      p.url,
      '/v1/responses',
      { model: 'x', input: 'ECHO hi', tools: tools.responses, stream: true },
      auth(),
    );
    assert.equal(s.status, 200);
    assert.match(s.headers.get('content-type') ?? '', /text\/event-stream/);
    const types = decodeSse(await s.text()).map((e) => e.event);
    assert.equal(types[0], 'response.created');
    assert.ok(types.includes('response.output_item.added'));
    assert.ok(types.includes('response.function_call_arguments.delta'));
    assert.equal(types.at(-1), 'response.completed');
  });

  test('anthropic messages, non-streaming and streaming, with a mid-conversation system message', async () => {
    const messages = [
      { role: 'user', content: 'Say hi' },
      { role: 'system', content: 'Be brief.' },
    ];
    const r = await post(
      p.url,
      '/v1/messages?beta=true',
      { model: 'claude-sonnet', max_tokens: 64, messages },
      { ...auth(), 'anthropic-version': '2023-06-01' },
    );
    assert.equal(r.status, 200, await r.clone().text());
    const body = (await r.json()) as {
      type: string;
      content: Array<{ type: string; text?: string }>;
      stop_reason: string;
    };
    assert.equal(body.type, 'message');
    assert.equal(body.stop_reason, 'end_turn');
    assert.equal(body.content.find((c) => c.type === 'text')?.text, 'Hello from the stand-in.');
    const served = standin.calls.at(-1)!;
    assert.match(
      served.promptText,
      /<\|im_start\|>system\nBe brief\.<\|im_end\|>/,
      'mid-conversation system reached the template',
    );

    const s = await post(
      p.url,
      '/v1/messages',
      {
        model: 'claude-sonnet',
        max_tokens: 64,
        messages: [{ role: 'user', content: 'ECHO hi' }],
        tools: tools.anthropic,
        stream: true,
      },
      auth(),
    );
    const events = decodeSse(await s.text());
    const types = events.map((e) => e.event);
    assert.equal(types[0], 'message_start');
    assert.equal(types.at(-1), 'message_stop');
    const delta = events.find((e) => e.event === 'message_delta');
    assert.equal(JSON.parse(delta!.data).delta.stop_reason, 'tool_use');
  });

  test('count_tokens uses the server tokenizer', async () => {
    const r = await post(
      p.url,
      '/v1/messages/count_tokens?beta=true',
      { model: 'x', messages: [{ role: 'user', content: 'hello there' }] },
      auth(),
    );
    assert.equal(r.status, 200);
    const body = (await r.json()) as { input_tokens: number };
    assert.ok(body.input_tokens > 3 && body.input_tokens < 30, String(body.input_tokens));
    const rec = (await p.records()).at(-1)!;
    assert.equal(rec.api, 'anthropic-count-tokens');
    assert.deepEqual(rec.warnings, []);
  });

  test('/v1/models lists the served model in either shape', async () => {
    const r = await fetch(`${p.url}/v1/models`, { headers: auth() });
    assert.deepEqual(
      ((await r.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id),
      ['Qwen/Qwen3-4B'],
    );
    const a = await fetch(`${p.url}/v1/models`, {
      headers: { 'x-api-key': p.key, 'anthropic-version': '2023-06-01' },
    });
    const body = (await a.json()) as { data: Array<{ type: string }>; has_more: boolean };
    assert.equal(body.data[0]!.type, 'model');
    assert.equal(body.has_more, false);
  });

  test('concurrent streaming calls are all recorded with their own ids', async () => {
    const before = (await p.records()).length;
    const n = 12;
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        post(
          p.url,
          '/v1/chat/completions',
          { model: 'x', stream: true, messages: [{ role: 'user', content: `hi ${i}` }] },
          auth(),
        ).then((r) => r.text()),
      ),
    );
    assert.ok(results.every((t) => t.includes('[DONE]')));
    const recs = (await p.records()).slice(before);
    assert.equal(recs.length, n);
    assert.equal(new Set(recs.map((r) => r.id)).size, n);
    for (const rec of recs) {
      const served = standin.calls.find(
        (c) =>
          c.promptIds.length === rec.prompt_token_ids?.length &&
          c.promptText.includes(JSON.stringify(rec.canonical_request).match(/hi \d+/)![0]),
      );
      assert.ok(served, 'the record matches the call the backend served');
      assert.deepEqual(rec.completion_token_ids, served.completionIds);
    }
  });

  describe('gemini', () => {
    type Chunk = {
      candidates: Array<{ content: { parts: Array<Record<string, unknown>> }; finishReason?: string }>;
      usageMetadata?: { promptTokenCount: number };
    };
    const goog = () => ({ 'x-goog-api-key': p.key });
    const ask = (text: string) => ({ contents: [{ role: 'user', parts: [{ text }] }], tools: tools.gemini });

    test('generateContent (x-goog-api-key): a tool call as a whole functionCall part', async () => {
      const r = await post(p.url, '/v1beta/models/Qwen/Qwen3-4B:generateContent', ask('ECHO hi'), goog());
      assert.equal(r.status, 200);
      const body = (await r.json()) as Chunk;
      const parts = body.candidates[0]!.content.parts;
      const call = parts.find((q) => q.functionCall)!;
      assert.deepEqual((call.functionCall as { args: unknown }).args, { command: 'echo hi' });
      assert.equal(body.candidates[0]!.finishReason, 'STOP');
      assert.ok(body.usageMetadata!.promptTokenCount > 0);
      const rec = (await p.records()).at(-1)!;
      assert.equal(rec.api, 'gemini');
      assert.equal(rec.stream, false);
      assert.equal(rec.token_exact, true);
      assert.equal(rec.finish_reason, 'tool_calls');
      assert.match(String(call.thoughtSignature), new RegExp(`^polar\\.${rec.id}$`));
    });

    test('streamGenerateContent?alt=sse (key in the query, recorded redacted)', async () => {
      const r = await post(
        p.url,
        `/v1beta/models/m:streamGenerateContent?alt=sse&key=${p.key}`,
        ask('Say hi'),
      );
      assert.equal(r.status, 200);
      assert.match(r.headers.get('content-type') ?? '', /text\/event-stream/);
      const chunks = decodeSse(await r.text()).map((e) => JSON.parse(e.data) as Chunk);
      const text = chunks
        .flatMap((c) => c.candidates[0]!.content.parts)
        .filter((q) => !q.thought && typeof q.text === 'string')
        .map((q) => q.text)
        .join('');
      assert.match(text, /Hello from the stand-in/);
      assert.equal(chunks.at(-1)!.candidates[0]!.finishReason, 'STOP');
      const rec = (await p.records()).at(-1)!;
      assert.equal(rec.stream, true);
      assert.equal(rec.request.path, '/v1beta/models/m:streamGenerateContent?alt=sse&key=<redacted>');
    });

    test("countTokens, the model list, and errors in Google's shape", async () => {
      const c = await post(p.url, '/v1beta/models/m:countTokens', ask('hello there'), goog());
      const counted = (await c.json()) as { totalTokens: number };
      assert.ok(counted.totalTokens > 3, String(counted.totalTokens));
      assert.equal((await p.records()).at(-1)!.api, 'gemini-count-tokens');
      const list = await fetch(`${p.url}/v1beta/models`, { headers: goog() });
      assert.deepEqual(
        ((await list.json()) as { models: Array<{ name: string }> }).models.map((m) => m.name),
        ['models/Qwen/Qwen3-4B'],
      );
      const denied = await post(p.url, '/v1beta/models/m:generateContent', ask('x'));
      assert.equal(denied.status, 401);
      assert.equal(((await denied.json()) as { error: { status: string } }).error.status, 'UNAUTHENTICATED');
      const bad = await post(p.url, '/v1beta/models/m:generateContent', { contents: 'x' }, goog());
      assert.equal(bad.status, 400);
      assert.deepEqual(await bad.json(), {
        error: { code: 400, message: 'contents: expected array', status: 'INVALID_ARGUMENT' },
      });
      const unknown = await post(p.url, '/v1beta/models/m:embedContent', ask('x'), goog());
      assert.equal(unknown.status, 404);
      assert.equal(((await unknown.json()) as { error: { status: string } }).error.status, 'NOT_FOUND');
    });
  });
});
