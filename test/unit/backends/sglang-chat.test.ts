/** `--backend sglang` and the probe against the SGLang chat stand-in (test/support/sglang-standin.ts). */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { OpenAICompatibleBackend } from '../../../src/backends/openai-compatible.ts';
import { probeBackend } from '../../../src/backends/probe.ts';
import type { CanonicalRequest, ProxyFault } from '../../../src/protocols/canonical.ts';
import { type SglangChatOptions, startSglangChatStandin } from '../../support/sglang-standin.ts';
import { collect, context, recorder } from './tokens-support.ts';

const BASH = {
  name: 'bash',
  description: 'Run',
  parameters: { type: 'object', properties: { command: { type: 'string' } } },
};
const req = (text: string, extra: Partial<CanonicalRequest> = {}): CanonicalRequest => ({
  model: 'h',
  messages: [{ role: 'user', content: [{ type: 'text', text }] }],
  tools: [BASH],
  stream: true,
  ...extra,
});

async function withSglang<T>(
  options: SglangChatOptions,
  body: (url: string, s: Awaited<ReturnType<typeof startSglangChatStandin>>) => Promise<T>,
) {
  const s = await startSglangChatStandin(options);
  try {
    return await body(s.url, s);
  } finally {
    await s.close();
  }
}

async function run(url: string, r: CanonicalRequest) {
  const backend = new OpenAICompatibleBackend('sglang', { kind: 'sglang', url, model: 'Qwen/Qwen3-4B' });
  const { recorder: rec, recorded } = recorder();
  const out = await collect(backend.generate(r, context('c1', new Map(), rec)));
  const error = out.events.find((e) => e.type === 'error') as { error: ProxyFault } | undefined;
  return { ...out, recorded, fault: error?.error };
}

describe('sglang chat backend', () => {
  test('non-streaming, ids per choice, reasoning_content, a parsed tool call: token-exact', async () => {
    await withSglang({}, async (url, s) => {
      const { response, recorded, fault } = await run(url, req('ECHO polar'));
      assert.equal(fault, undefined);
      assert.equal(s.calls[0]!.body.stream, false);
      assert.equal(response?.toolCalls[0]?.name, 'bash');
      assert.equal(response?.reasoning, 'The user wants a short answer.');
      assert.deepEqual(recorded.tokens!.promptTokenIds, s.calls[0]!.promptIds);
      assert.deepEqual(recorded.tokens!.completionTokenIds, s.calls[0]!.completionIds);
      assert.equal(recorded.tokens!.inexact, undefined);
    });
  });

  test('abort is an error; a prompt over the context is the context-length error', async () => {
    await withSglang({ abort: true }, async (url) => {
      const { fault } = await run(url, req('hi'));
      assert.match(fault!.message, /aborted the generation/);
    });
    await withSglang({ contextLen: 300 }, async (url) => {
      const { fault } = await run(url, req('word '.repeat(400)));
      assert.equal(fault?.kind, 'context_length_exceeded');
      assert.equal(fault?.status, 400);
    });
  });

  test('max tokens over what is left: one retry, one token inside SGLang stricter rule', async () => {
    await withSglang({ contextLen: 2000 }, async (url, s) => {
      const { fault, recorded } = await run(url, req('hi', { maxTokens: 32000 }));
      assert.equal(fault, undefined);
      const prompt = s.calls[0]!.promptIds.length;
      assert.equal(s.calls[0]!.body.max_tokens, 2000 - prompt - 1);
      assert.equal((recorded.info.max_tokens_fit as { counted_by: string }).counted_by, 'server_error');
    });
  });
});

describe('probe: sglang', () => {
  test('a good set-up reads its parsers from /get_server_info', async () => {
    await withSglang({}, async (url) => {
      const report = await probeBackend({ kind: 'sglang', url, model: 'Qwen/Qwen3-4B' });
      assert.equal(report.ok, true);
      const byName = Object.fromEntries(report.checks.map((c) => [c.name, c]));
      assert.equal(byName.tool_calling!.detail, 'tool call parser qwen25');
      assert.equal(byName.reasoning_parser!.detail, 'qwen3');
      assert.equal(byName.token_ids!.status, 'ok');
    });
  });

  test('no --tool-call-parser: fails naming the flag (tool calls would come back as text)', async () => {
    await withSglang({ toolCallParser: null, reasoningParser: null }, async (url) => {
      const report = await probeBackend({ kind: 'sglang', url, model: 'Qwen/Qwen3-4B' });
      assert.equal(report.ok, false);
      const byName = Object.fromEntries(report.checks.map((c) => [c.name, c]));
      assert.equal(byName.tool_calling!.status, 'fail');
      assert.match(byName.tool_calling!.fix!, /--tool-call-parser/);
      assert.equal(byName.reasoning_parser!.status, 'warn');
    });
  });
});
