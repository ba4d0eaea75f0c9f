/**
 * The token path against the vLLM /v1/completions and SGLang /generate stand-ins
 * (test/support/completions-standin.ts): per-choice prompt_token_ids, max tokens fitted to the served
 * context, a prompt over it as the context-length error, server 400s as 400s, abort finishes as errors,
 * SGLang's seed inside sampling_params.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { HttpCompletions } from '../../../src/backends/token-generator.ts';
import { TokenBackend } from '../../../src/backends/tokens.ts';
import type { CanonicalRequest, ProxyFault } from '../../../src/protocols/canonical.ts';
import { type ChatTokenizer, loadChatTokenizer } from '../../../src/tokenizer/chat-tokenizer.ts';
import {
  type CompletionsStandInOptions,
  type StandIn,
  startCompletionsStandIn,
} from '../../support/completions-standin.ts';
import { IM_END } from '../../support/qwen-tokenizer.ts';
import { collect, context, qwenDir, recorder } from './tokens-support.ts';

let tok: ChatTokenizer;
before(async () => {
  tok = await loadChatTokenizer(qwenDir, { allowRemote: false });
});

const user = (text: string): CanonicalRequest => ({
  model: 'm',
  messages: [{ role: 'user', content: [{ type: 'text', text }] }],
  tools: [],
  stream: true,
});

async function withServer(
  options: CompletionsStandInOptions,
  server: 'vllm' | 'sglang',
  body: (s: StandIn, run: (r: CanonicalRequest) => ReturnType<typeof call>) => Promise<void>,
) {
  const standin = await startCompletionsStandIn({
    script: [[...tok.encodeFull('Hello.'), IM_END]],
    ...options,
  });
  const backend = new TokenBackend({
    kind: 'tokens',
    tokenizer: tok,
    generator: new HttpCompletions(server, standin.url, 'standin'),
    options: { kind: 'tokens', model: 'standin', url: standin.url },
  });
  try {
    await body(standin, (r) => call(backend, r));
  } finally {
    await standin.close();
  }
}

async function call(backend: TokenBackend, r: CanonicalRequest) {
  const { recorder: rec, recorded } = recorder();
  const out = await collect(backend.generate(r, context('c1', new Map(), rec)));
  const error = out.events.find((e) => e.type === 'error') as { error: ProxyFault } | undefined;
  return { ...out, recorded, fault: error?.error };
}

for (const server of ['vllm', 'sglang'] as const) {
  describe(`tokens backend over ${server}`, () => {
    test('a max tokens over what the prompt leaves is fitted to the served context and recorded', async () => {
      await withServer({ maxModelLen: 1000 }, server, async (standin, run) => {
        const { fault, recorded } = await run({ ...user('hi'), maxTokens: 32000 });
        assert.equal(fault, undefined);
        const prompt = standin.calls[0]!.promptIds.length;
        const sent =
          server === 'vllm'
            ? standin.requests[0]!.max_tokens
            : (standin.requests[0]!.sampling_params as { max_new_tokens: number }).max_new_tokens;
        // SGLang refuses prompt + max_new_tokens >= context_len: one token less than vLLM's rule
        const usable = server === 'vllm' ? 1000 : 999;
        assert.equal(sent, usable - prompt);
        assert.deepEqual(recorded.info.max_tokens_fit, {
          asked: 32000,
          sent: usable - prompt,
          prompt_tokens: prompt,
          max_model_len: usable,
          counted_by: 'prompt_ids',
        });
      });
    });

    test("a prompt that fills the context: the harness's context-length error, nothing sent", async () => {
      await withServer({ maxModelLen: 50 }, server, async (standin, run) => {
        const { fault } = await run(user('word '.repeat(80)));
        assert.equal(fault?.kind, 'context_length_exceeded');
        assert.equal(fault?.status, 400);
        assert.match(
          fault!.message,
          new RegExp(`^prompt is too long: \\d+ tokens > ${server === 'vllm' ? 49 : 48} maximum`),
        );
        assert.equal(standin.calls.length, 0);
      });
    });

    test('an abort finish is an error, not a stop', async () => {
      await withServer({ finish: 'abort' }, server, async (_standin, run) => {
        const { fault, response } = await run(user('hi'));
        assert.equal(response, undefined);
        assert.equal(fault?.kind, 'backend_error');
        assert.match(fault!.message, /aborted the generation/);
      });
    });
  });
}

describe('tokens backend: server errors and request fields', () => {
  test("the server's own context 400 (no /v1/models to fit from) is the context-length error, not a 502", async () => {
    await withServer({ maxModelLen: 60 }, 'sglang', async (_standin, run) => {
      // the generator is asked directly, past the fit: what the server's 400 becomes
      const generator = new HttpCompletions('sglang', _standin.url, 'standin');
      const { recorder: rec } = recorder();
      const it = generator.generate(
        { promptIds: Array(70).fill(9707), maxTokens: 10, temperature: 1, topP: 1, stopTokenIds: [IM_END] },
        { signal: new AbortController().signal, recorder: rec },
      );
      await assert.rejects(it.next(), (error: { fault: ProxyFault }) => {
        assert.equal(error.fault.kind, 'context_length_exceeded');
        assert.equal(error.fault.status, 400);
        assert.match(
          error.fault.message,
          /The input \(70 tokens\) is longer than the model's context length \(60 tokens\)/,
        );
        return true;
      });
      void run;
    });
  });

  test('a bad request to /v1/completions is a 400 with the server message, not a 502', async () => {
    await withServer({}, 'vllm', async (standin) => {
      const generator = new HttpCompletions('vllm', standin.url, 'standin');
      const { recorder: rec } = recorder();
      const it = generator.generate(
        { promptIds: [-5], maxTokens: 10, temperature: 1, topP: 1, stopTokenIds: [IM_END] },
        { signal: new AbortController().signal, recorder: rec },
      );
      await assert.rejects(it.next(), (error: { fault: ProxyFault }) => {
        assert.equal(error.fault.kind, 'invalid_request');
        assert.equal(error.fault.status, 400);
        assert.match(error.fault.message, /prompt must be token ids in the vocabulary/);
        return true;
      });
    });
  });

  test("SGLang's seed goes inside sampling_params; vLLM's per-choice prompt_token_ids are read", async () => {
    await withServer({}, 'sglang', async (standin) => {
      const generator = new HttpCompletions('sglang', standin.url, 'standin');
      const { recorder: rec } = recorder();
      const it = generator.generate(
        { promptIds: [9707], maxTokens: 10, temperature: 1, topP: 1, seed: 7, stopTokenIds: [IM_END] },
        { signal: new AbortController().signal, recorder: rec },
      );
      while (!(await it.next()).done) {}
      const body = standin.requests[0]!;
      assert.equal((body.sampling_params as { sampling_seed?: number }).sampling_seed, 7);
      assert.equal(body.sampling_seed, undefined);
    });
    await withServer({}, 'vllm', async (standin) => {
      const generator = new HttpCompletions('vllm', standin.url, 'standin');
      const { recorder: rec } = recorder();
      const it = generator.generate(
        { promptIds: [9707, 11], maxTokens: 10, temperature: 1, topP: 1, stopTokenIds: [IM_END] },
        { signal: new AbortController().signal, recorder: rec },
      );
      let r = await it.next();
      while (!r.done) r = await it.next();
      assert.deepEqual(r.value.serverPromptIds, [9707, 11]);
      assert.equal(standin.requests[0]!.prompt_token_ids, undefined);
    });
  });
});
