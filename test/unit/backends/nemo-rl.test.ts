/**
 * `--backend nemo-rl` against the NeMo RL generation-server stand-in (test/support/nemo-rl-standin.ts,
 * transcribed from NVIDIA-NeMo/RL vllm_worker_async.py / utils.py / openai_server_utils.py): polar puts
 * the ids of the turn it sampled on the harness's copy of it, and the server keeps the rollout
 * contiguous with them, whatever the template does to the history.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { findTurn, NemoRlBackend } from '../../../src/backends/nemo-rl.ts';
import type {
  AssistantMessage,
  CanonicalMessage,
  CanonicalRequest,
  ProxyFault,
} from '../../../src/protocols/canonical.ts';
import {
  type NemoRlStandin,
  replacePrefixTokens,
  startNemoRlStandin,
} from '../../support/nemo-rl-standin.ts';
import { collect, context, isPrefix, recorder } from './tokens-support.ts';

const BASH = {
  name: 'bash',
  description: 'Run a shell command',
  parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
};
const user = (text: string): CanonicalMessage => ({ role: 'user', content: [{ type: 'text', text }] });
const req = (messages: CanonicalMessage[], extra: Partial<CanonicalRequest> = {}): CanonicalRequest => ({
  model: 'harness',
  messages,
  tools: [BASH],
  stream: true,
  ...extra,
});

let standin: NemoRlStandin;
before(async () => {
  standin = await startNemoRlStandin();
});
after(() => standin.close());

function backend(extra: Record<string, unknown> = {}) {
  return new NemoRlBackend({ kind: 'nemo-rl', url: standin.url, model: 'Qwen/Qwen3-4B', ...extra });
}

async function call(b: NemoRlBackend, r: CanonicalRequest, state: Map<string, unknown>, id: string) {
  const { recorder: rec, recorded } = recorder();
  const out = await collect(b.generate(r, context(id, state, rec)));
  const error = out.events.find((e) => e.type === 'error') as { error: ProxyFault } | undefined;
  return { ...out, recorded, fault: error?.error };
}

/** A Codex-shaped session: the harness drops the reasoning it got back, as Codex does with a chat backend. */
async function session(b: NemoRlBackend) {
  const state = new Map<string, unknown>();
  const messages: CanonicalMessage[] = [user('ECHO polar')];
  const first = await call(b, req(messages), state, 'c1');
  const r1 = first.response!;
  assert.equal(r1.toolCalls[0]?.name, 'bash');
  messages.push({ role: 'assistant', content: r1.content, toolCalls: r1.toolCalls } as AssistantMessage, {
    role: 'tool',
    toolCallId: r1.toolCalls[0]!.id,
    content: 'polar',
  });
  const second = await call(b, req(messages), state, 'c2');
  messages.push({ role: 'assistant', content: second.response!.content, toolCalls: [] }, user('and again?'));
  const third = await call(b, req(messages), state, 'c3');
  return [first, second, third];
}

describe('nemo-rl backend', () => {
  test('every call continues the previous prompt + generation exactly (thinking on, reasoning dropped)', async () => {
    const start = standin.calls.length;
    const calls = await session(backend());
    for (const c of calls) assert.equal(c.fault, undefined);
    const server = standin.calls.slice(start);
    for (let k = 1; k < calls.length; k++) {
      const prev = calls[k - 1]!.recorded.tokens!;
      const cur = calls[k]!.recorded.tokens!;
      assert.ok(
        isPrefix([...prev.promptTokenIds!, ...prev.completionTokenIds!], cur.promptTokenIds!),
        `call ${k + 1} extends call ${k}`,
      );
      assert.ok(server[k]!.requiredPrefix, 'the request carried the prefix ids');
      assert.deepEqual(calls[k]!.recorded.info.prefix, {
        mode: 'prefix_ids',
        call: `c${k}`,
        matched_by: k === 1 ? 'tool_call_id' : 'content',
        tokens: prev.promptTokenIds!.length + prev.completionTokenIds!.length,
      });
    }
    // recorded ids and logprobs are the server's own
    for (let k = 0; k < calls.length; k++) {
      assert.deepEqual(calls[k]!.recorded.tokens!.promptTokenIds, server[k]!.promptIds);
      assert.deepEqual(calls[k]!.recorded.tokens!.completionTokenIds, server[k]!.completionIds);
      assert.equal(calls[k]!.recorded.tokens!.completionLogprobs!.length, server[k]!.completionIds.length);
    }
  });

  test('without the prefix ids the same history is not contiguous (what the server fixes)', async () => {
    const start = standin.calls.length;
    await session(backend());
    const withPrefix = standin.calls.slice(start);
    const second = withPrefix[1]!;
    // the same request body, stripped of the ids polar added: the template's own rendering
    const body = structuredClone(second.body) as { messages: Record<string, unknown>[] };
    for (const m of body.messages) {
      delete m.prompt_token_ids;
      delete m.generation_token_ids;
    }
    const res = await fetch(`${standin.url.replace(/\/v1$/, '')}/tokenize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const rendered = ((await res.json()) as { tokens: number[] }).tokens;
    const first = withPrefix[0]!;
    assert.ok(
      !isPrefix([...first.promptIds, ...first.completionIds], rendered),
      'the template drops the <think> block',
    );
  });

  test('the request: non-streaming, token flags, temperature and top_p always, never top_k', async () => {
    const start = standin.calls.length;
    const { fault } = await call(backend(), req([user('hi')]), new Map(), 'c1');
    assert.equal(fault, undefined);
    const body = standin.calls[start]!.body;
    assert.equal(body.stream, false);
    assert.equal(body.logprobs, true);
    assert.equal(body.top_logprobs, 0);
    assert.equal(body.return_tokens_as_token_ids, true);
    assert.equal(body.temperature, 1);
    assert.equal(body.top_p, 1);
    assert.equal(body.top_k, undefined);
  });

  test("a temperature other than NeMo RL's generation config: the server's refusal is an error", async () => {
    const { fault } = await call(backend(), req([user('hi')], { temperature: 0.6 }), new Map(), 'c1');
    assert.equal(fault?.kind, 'backend_error');
    assert.match(fault!.message, /answered 500/);
  });

  test('a last assistant turn polar did not sample: no ids sent, the template renders it, and it is recorded', async () => {
    const start = standin.calls.length;
    const messages: CanonicalMessage[] = [
      user('hi'),
      { role: 'assistant', content: 'an answer from elsewhere', toolCalls: [] },
      user('more'),
    ];
    const { fault, recorded } = await call(backend(), req(messages), new Map(), 'c1');
    assert.equal(fault, undefined);
    assert.equal(standin.calls[start]!.requiredPrefix, null);
    assert.equal((recorded.info.prefix as { mode: string }).mode, 'rendered');
    assert.ok(recorded.warnings.some((w) => /not sampled by polar/.test(w)));
  });

  test("a prompt that fills the context: the harness's context-length error", async () => {
    const small = await startNemoRlStandin({ maxModelLen: 200 });
    try {
      const b = new NemoRlBackend({ kind: 'nemo-rl', url: small.url, model: 'm' });
      const { fault } = await call(b, req([user('word '.repeat(300))]), new Map(), 'c1');
      assert.equal(fault?.kind, 'context_length_exceeded');
      assert.equal(fault?.status, 400);
    } finally {
      await small.close();
    }
  });
});

describe('nemo-rl helpers', () => {
  test('findTurn: by tool call id first, then by the text of a plain answer', () => {
    const turns = [
      { callId: 'a', content: 'Done.', toolCallIds: [], promptIds: [1], generationIds: [2] },
      { callId: 'b', content: '', toolCallIds: ['t1'], promptIds: [3], generationIds: [4] },
    ];
    const tool: AssistantMessage = {
      role: 'assistant',
      content: '',
      toolCalls: [{ id: 't1', name: 'x', arguments: '{}' }],
    };
    assert.deepEqual(findTurn(turns, tool)?.turn.callId, 'b');
    assert.equal(findTurn(turns, { role: 'assistant', content: ' Done. ', toolCalls: [] })?.by, 'content');
    assert.equal(findTurn(turns, { role: 'assistant', content: 'edited', toolCalls: [] }), null);
  });

  test("replace_prefix_tokens: the model's ids up to their EOS, then the template from its N-th EOS", () => {
    // the example of openai_server_utils.replace_prefix_tokens' docstring, with Qwen3's EOS
    const E = 151645;
    assert.deepEqual(
      replacePrefixTokens(
        [11, 12, 13, 40, 41, 220, 17, E],
        [11, 12, 13, 40, 41, 1001, E],
        [11, 12, 13, 40, 41, 1001, E, 21, 22, 40, 41],
      ),
      [11, 12, 13, 40, 41, 220, 17, E, 21, 22, 40, 41],
    );
  });
});
