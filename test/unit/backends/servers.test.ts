/**
 * The chat backends against stand-ins that transcribe the real servers (test/support/vllm-standin.ts,
 * ../shared/reference/real-servers.md): ids checked against usage (vLLM #27482), max_tokens fitted to
 * max_model_len, context overflow as the harness's own error, server 400s as 400s, abort as an error,
 * `reasoning` and `reasoning_content`, auth on every request.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { OpenAICompatibleBackend } from '../../../src/backends/openai-compatible.ts';
import { resetWarnedCauses } from '../../../src/backends/token-check.ts';
import type { BackendOptions } from '../../../src/backends/types.ts';
import type { CanonicalRequest } from '../../../src/protocols/canonical.ts';
import { type Standin, type StandinOptions, startStandin } from '../../support/vllm-standin.ts';
import { collect, context, recorder } from './tokens-support.ts';

const BASH = {
  name: 'bash',
  description: 'Run a shell command',
  parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
};

function request(text: string, extra: Partial<CanonicalRequest> = {}): CanonicalRequest {
  return {
    model: 'harness-model',
    messages: [{ role: 'user', content: [{ type: 'text', text }] }],
    tools: [BASH],
    stream: true,
    ...extra,
  };
}

async function run(standin: Standin, req: CanonicalRequest, options: Partial<BackendOptions> = {}) {
  const backend = new OpenAICompatibleBackend('vllm', {
    kind: 'vllm',
    url: standin.url,
    model: 'Qwen/Qwen3-4B',
    ...options,
  });
  const { recorder: rec, recorded } = recorder();
  const out = await collect(backend.generate(req, context('c1', new Map(), rec)));
  return { ...out, recorded, error: out.events.find((e) => e.type === 'error') };
}

async function withStandin(options: StandinOptions, body: (s: Standin) => Promise<void>) {
  const standin = await startStandin(options);
  try {
    await body(standin);
  } finally {
    await standin.close();
  }
}

describe('vLLM chat backend: token ids checked against usage', () => {
  before(() => resetWarnedCauses());

  test('a tool call through a server that drops the parser-swallowed ids is never token-exact', async () => {
    await withStandin({ dropToolParserIds: true }, async (standin) => {
      const { recorded, error, response } = await run(standin, request('ECHO polar'));
      assert.equal(error, undefined, 'the call itself succeeds: the harness gets its tool call');
      assert.equal(response?.toolCalls[0]?.name, 'bash');
      const truth = standin.calls[0]!.completionIds;
      const got = recorded.tokens!.completionTokenIds!;
      assert.ok(got.length < truth.length, 'the stand-in really dropped ids');
      assert.equal(recorded.tokens!.inexact?.cause, 'ids_dropped_by_server');
      assert.match(
        recorded.tokens!.inexact!.detail,
        new RegExp(`${got.length} completion token ids for usage.completion_tokens ${truth.length}`),
      );
      assert.deepEqual(recorded.info.token_inexact, recorded.tokens!.inexact);
      assert.ok(recorded.warnings.some((w) => /ids_dropped_by_server/.test(w)));
    });
  });

  test('the same call through a fixed server is exact: all ids, no mark', async () => {
    await withStandin({}, async (standin) => {
      const { recorded, error } = await run(standin, request('ECHO polar'));
      assert.equal(error, undefined);
      assert.deepEqual(recorded.tokens!.completionTokenIds, standin.calls[0]!.completionIds);
      assert.deepEqual(recorded.tokens!.promptTokenIds, standin.calls[0]!.promptIds);
      assert.equal(recorded.tokens!.inexact, undefined);
      assert.equal(recorded.info.token_inexact, undefined);
    });
  });
});

describe('vLLM chat backend: max_tokens fitted to the context', () => {
  test("Claude Code's 32000 against max_model_len 4096: what the prompt leaves is sent and recorded", async () => {
    await withStandin({ maxModelLen: 4096 }, async (standin) => {
      const { recorded, error } = await run(standin, request('ECHO polar', { maxTokens: 32000 }));
      assert.equal(error, undefined);
      const prompt = standin.calls[0]!.promptIds.length;
      assert.equal(standin.calls[0]!.body.max_tokens, 4096 - prompt);
      assert.deepEqual(recorded.info.max_tokens_fit, {
        asked: 32000,
        sent: 4096 - prompt,
        prompt_tokens: prompt,
        max_model_len: 4096,
        counted_by: 'tokenize',
      });
    });
  });

  test('a max_tokens that fits goes unchanged, with no count and no record', async () => {
    await withStandin({ maxModelLen: 40960 }, async (standin) => {
      const { recorded, error } = await run(standin, request('ECHO polar', { maxTokens: 1000 }));
      assert.equal(error, undefined);
      assert.equal(standin.calls[0]!.body.max_tokens, 1000);
      assert.equal(recorded.info.max_tokens_fit, undefined);
    });
  });

  test("a prompt that fills the context is the harness's context-length error, and nothing is generated", async () => {
    await withStandin({ maxModelLen: 300 }, async (standin) => {
      const long = 'word '.repeat(400);
      const { error } = await run(standin, request(long, { maxTokens: 32000 }));
      assert.equal(error?.type, 'error');
      const f = (error as { error: { kind: string; status: number; message: string } }).error;
      assert.equal(f.kind, 'context_length_exceeded');
      assert.equal(f.status, 400);
      assert.match(f.message, /^prompt is too long: \d+ tokens > 299 maximum/);
      assert.equal(standin.calls.length, 0);
    });
  });

  test('a server that does not state max_model_len: its 400 states the numbers, one retry with what is left', async () => {
    await withStandin({ maxModelLen: 4096, hideMaxModelLen: true }, async (standin) => {
      const { recorded, error } = await run(standin, request('ECHO polar', { maxTokens: 32000 }));
      assert.equal(error, undefined);
      const prompt = standin.calls[0]!.promptIds.length;
      assert.equal(standin.calls[0]!.body.max_tokens, 4096 - prompt);
      assert.equal((recorded.info.max_tokens_fit as { counted_by: string }).counted_by, 'server_error');
    });
  });
});

describe('vLLM chat backend: errors as the server gives them', () => {
  test('tools without --enable-auto-tool-choice: a 400 naming the flags, not a retryable 502', async () => {
    await withStandin({ toolParser: false }, async (standin) => {
      const { error } = await run(standin, request('ECHO polar'));
      const f = (error as { error: { kind: string; status: number; message: string } }).error;
      assert.equal(f.status, 400);
      assert.equal(f.kind, 'invalid_request');
      assert.match(f.message, /--enable-auto-tool-choice and --tool-call-parser/);
    });
  });

  for (const form of ['nested', 'flat'] as const) {
    test(`a ${form} error body: its message is passed on`, async () => {
      await withStandin({ errorForm: form }, async (standin) => {
        standin.faults.push({ status: 400, message: 'temperature must be non-negative' });
        const { error } = await run(standin, request('hi'));
        const f = (error as { error: { status: number; message: string } }).error;
        assert.equal(f.status, 400);
        assert.match(f.message, /\(400\): temperature must be non-negative$/);
      });
    });
  }

  test('finish_reason abort is an error, not a stop', async () => {
    await withStandin({}, async (standin) => {
      standin.faults.push({ abort: true });
      const { error, response } = await run(standin, request('hi'));
      assert.equal(response, undefined);
      assert.match((error as { error: { message: string } }).error.message, /aborted the generation/);
    });
  });

  test('a server that answers HTML: one line naming the URL and what was expected', async () => {
    const { createServer } = await import('node:http');
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><html><body>Login</body></html>');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`;
    try {
      const { error } = await run({ url } as Standin, request('hi', { tools: [] }));
      const message = (error as { error: { message: string } }).error.message;
      assert.match(message, new RegExp(`${url}/chat/completions answered an HTML page`));
      assert.match(message, /not a chat completion/);
      assert.ok(!message.includes('\n'));
    } finally {
      server.close();
    }
  });
});

/** Polls until `check` holds (every 20 ms, at most `ms`): false if it never did. */
async function eventually(check: () => boolean, ms = 5000): Promise<boolean> {
  for (const t0 = Date.now(); Date.now() - t0 < ms; await new Promise((r) => setTimeout(r, 20)))
    if (check()) return true;
  return check();
}

describe('vLLM chat backend: the end of a stream', () => {
  test('the answer is complete at [DONE], not at the end of the body (a server that never sends it)', async () => {
    await withStandin({}, async (standin) => {
      standin.faults.push({ endAfterDoneMs: Number.POSITIVE_INFINITY });
      // (reading to the body's end first, the call would wait for the idle limit and fail with it)
      const { error, response } = await run(standin, request('hi', { tools: [] }), { idleTimeoutMs: 60_000 });
      assert.equal(error, undefined);
      assert.equal(response?.content, 'Hello from the stand-in.');
      assert.equal(response?.finishReason, 'stop');
    });
  });

  test("the body's end is read after the answer, not cancelled: the keep-alive connection stays", async () => {
    await withStandin({}, async (standin) => {
      standin.faults.push({ endAfterDoneMs: 50 });
      const { error } = await run(standin, request('hi', { tools: [] }));
      assert.equal(error, undefined);
      // (a body cancelled at [DONE] closes its connection at once: the server could not end the response)
      assert.ok(await eventually(() => standin.connections.responsesEnded === 1), 'the response was ended');
      assert.equal(standin.connections.open, 1, 'its connection is still open, for the next call');
      assert.equal(standin.connections.accepted, 1);
    });
  });

  test('a body that never ends after [DONE] is cut by the idle limit: its connection closes, none is left', async () => {
    await withStandin({}, async (standin) => {
      standin.faults.push({ endAfterDoneMs: Number.POSITIVE_INFINITY });
      const { error } = await run(standin, request('hi', { tools: [] }), { idleTimeoutMs: 200 });
      assert.equal(error, undefined, 'the call had its whole answer');
      assert.ok(await eventually(() => standin.connections.open === 0), 'the connection was closed');
      const next = await run(standin, request('hi again', { tools: [] }));
      assert.equal(next.error, undefined);
      assert.equal(standin.connections.accepted, 2, 'the cut connection was not reused');
    });
  });
});

describe('vLLM chat backend: reasoning fields and auth', () => {
  for (const field of ['reasoning', 'reasoning_content'] as const) {
    test(`reasoning read from \`${field}\``, async () => {
      await withStandin({ reasoningField: field }, async (standin) => {
        const { response } = await run(standin, request('hi', { tools: [] }));
        assert.equal(response?.reasoning, 'The user wants a short answer.');
        assert.equal(response?.content, 'Hello from the stand-in.');
      });
    });
  }

  test('a server started with --api-key: every request polar makes carries it', async () => {
    await withStandin({ apiKey: 'k-123', maxModelLen: 4096 }, async (standin) => {
      const ok = await run(standin, request('ECHO polar', { maxTokens: 32000 }), { apiKey: 'k-123' });
      assert.equal(ok.error, undefined);
      // the fit needed /v1/models and /tokenize: both passed the key check
      assert.equal((ok.recorded.info.max_tokens_fit as { counted_by: string }).counted_by, 'tokenize');
      const denied = await run(standin, request('hi'));
      assert.match((denied.error as { error: { message: string } }).error.message, /401.*--api-key/);
    });
  });
});
