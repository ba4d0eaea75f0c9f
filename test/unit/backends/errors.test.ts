/** Server error bodies and context-length messages as the real servers word them. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fitToContext, promptUpperBound, retryAfterContextFault } from '../../../src/backends/context-fit.ts';
import { contextLimit, errorDetail, upstreamFault } from '../../../src/backends/http.ts';
import { fault } from '../../../src/protocols/canonical.ts';

describe('error bodies', () => {
  test('nested (current vLLM, SGLang /generate), flat (old vLLM, SGLang chat), FastAPI detail, HTML, text', () => {
    assert.equal(
      errorDetail('{"error":{"message":"bad","type":"BadRequestError","param":null,"code":400}}'),
      'bad',
    );
    assert.equal(
      errorDetail('{"object":"error","message":"old","type":"BadRequestError","code":400}'),
      'old',
    );
    assert.equal(errorDetail('{"error":"Unauthorized"}'), 'Unauthorized');
    assert.equal(errorDetail('{"detail":"Not Found"}'), 'Not Found');
    assert.match(
      errorDetail('<html>\n<body>502 Bad Gateway</body></html>'),
      /^an HTML page, not a JSON error \(<html> <body>502/,
    );
    assert.equal(errorDetail('Internal Server Error'), 'Internal Server Error');
  });

  test('client errors are 400 (context ones the context kind); auth names --api-key; 5xx stay 502', () => {
    const ctx = upstreamFault(
      'u',
      400,
      JSON.stringify({
        error: {
          message:
            "This model's maximum context length is 100 tokens. However, your request has 120 input tokens.",
        },
      }),
    );
    assert.equal(ctx.kind, 'context_length_exceeded');
    assert.equal(ctx.status, 400);
    const bad = upstreamFault('u', 422, '{"detail":[{"msg":"field required"}]}');
    assert.equal(bad.kind, 'invalid_request');
    assert.equal(bad.status, 400);
    const auth = upstreamFault('u', 401, '{"error":"Unauthorized"}');
    assert.equal(auth.status, 502);
    assert.match(auth.message, /--api-key/);
    assert.equal(upstreamFault('u', 503, '').status, 502);
  });

  test('context-length messages: the limit and the prompt length when stated', () => {
    const vllm =
      "'max_tokens' or 'max_completion_tokens' is too large: 32000. This model's maximum context length is 8192 tokens and your request has 900 input tokens (32000 > 8192 - 900).";
    assert.deepEqual(contextLimit(vllm), { maxModelLen: 8192, promptTokens: 900 });
    const older =
      "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (1000 in the messages, 4000 in the completion).";
    assert.deepEqual(contextLimit(older), { maxModelLen: 4096, promptTokens: 1000 });
    assert.deepEqual(
      contextLimit("The input (70 tokens) is longer than the model's context length (60 tokens)."),
      {
        maxModelLen: 60,
        promptTokens: 70,
      },
    );
    assert.deepEqual(
      contextLimit('Prompt length (9) fills or exceeds max_model_len (8). No room for output tokens.'),
      {
        maxModelLen: 8,
        promptTokens: 9,
      },
    );
    assert.equal(contextLimit('temperature must be non-negative'), null);
  });
});

describe('fitting max tokens', () => {
  test('fits, caps with a record, or refuses with the Anthropic wording', () => {
    assert.deepEqual(fitToContext(100, 50, 1000, 'tokenize'), { maxTokens: 100 });
    assert.deepEqual(fitToContext(32000, 900, 8192, 'tokenize'), {
      maxTokens: 7292,
      fit: { asked: 32000, sent: 7292, prompt_tokens: 900, max_model_len: 8192, counted_by: 'tokenize' },
    });
    const refused = fitToContext(10, 8192, 8192, 'prompt_ids');
    assert.ok('fault' in refused);
    assert.match(refused.fault.message, /^prompt is too long: 8192 tokens > 8191 maximum/);
  });

  test('retry after a 400 only when the message states both numbers and the prompt fits', () => {
    const f = (m: string) => fault('context_length_exceeded', m);
    const vllm = f('maximum context length is 8192 tokens and your request has 900 input tokens');
    assert.deepEqual(retryAfterContextFault(vllm, 32000), {
      asked: 32000,
      sent: 7292,
      prompt_tokens: 900,
      max_model_len: 8192,
      counted_by: 'server_error',
    });
    const sglang = f(
      "Requested token count exceeds the model's maximum context length of 1000 tokens. You requested a total of 1000 tokens: 9 tokens from the input messages and 991 tokens for the completion.",
    );
    assert.equal(retryAfterContextFault(sglang, 991)?.sent, 990);
    assert.equal(
      retryAfterContextFault(
        f("The input (70 tokens) is longer than the model's context length (60 tokens)."),
        10,
      ),
      null,
    );
    assert.equal(retryAfterContextFault(fault('invalid_request', 'x'), 10), null);
  });

  test('the byte bound is an upper bound of the real token count', async () => {
    const { qwenTokenizer } = await import('../../support/qwen-tokenizer.ts');
    const tok = await qwenTokenizer();
    const text = 'polar ünïcode 漢字 and code: {"a": [1, 2]}\n'.repeat(50);
    const request = {
      model: 'm',
      messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text }] }],
      tools: [],
      stream: false,
    };
    const rendered = tok.apply_chat_template([{ role: 'user', content: text }] as never, {
      tokenize: false,
      add_generation_prompt: true,
    }) as string;
    assert.ok(tok.encode(rendered, { add_special_tokens: false }).length <= promptUpperBound(request));
  });
});

describe('server root', () => {
  test('whatever URL a backend holds, the root is where /v1/models, /tokenize and /generate live', async () => {
    const { rootUrl } = await import('../../../src/backends/server-info.ts');
    for (const url of [
      'http://h:8000',
      'http://h:8000/',
      'http://h:8000/v1',
      'http://h:8000/v1/',
      'http://h:8000/v1/completions',
      'http://h:8000/v1/chat/completions',
      'http://h:8000/generate',
    ]) {
      assert.equal(rootUrl(url), 'http://h:8000', url);
    }
  });
});
