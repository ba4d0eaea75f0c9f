import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  type GenerateParams,
  HttpCompletions,
  type TokenGenerator,
} from '../../../src/backends/token-generator.ts';
import { TokenBackend } from '../../../src/backends/tokens.ts';
import type {
  CanonicalMessage,
  CanonicalRequest,
  CanonicalResponse,
} from '../../../src/protocols/canonical.ts';
import { type ChatTokenizer, loadChatTokenizer } from '../../../src/tokenizer/chat-tokenizer.ts';
import { type StandIn, startStandIn } from '../../support/completions-standin.ts';
import { collect, context, isPrefix, qwenDir, type Recorded, recorder } from './tokens-support.ts';

let tok: ChatTokenizer;
const IM_END = 151645;

// what the "model" samples on each call (Qwen3 with thinking on)
const sampledTexts = [
  '<think>\nI should list the files first.\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls", "cwd": "."}}\n</tool_call>',
  '<think>\nThere is a.txt; read it.\n</think>\n\nReading it.\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "cat a.txt"}}\n</tool_call>',
  '<think>\nIt says hello.\n</think>\n\nThe file says hello.',
  '<think>\nOne line.\n</think>\n\nIt has 1 line.',
];

const tools = [
  {
    name: 'bash',
    description: 'Run a shell command',
    parameters: { type: 'object', properties: { cmd: { type: 'string' }, cwd: { type: 'string' } } },
  },
];

function request(messages: CanonicalMessage[]): CanonicalRequest {
  return { model: 'qwen3', messages, tools, stream: true, maxTokens: 256, temperature: 1 };
}

/** what a harness sends back for our answer: its ids, its reasoning, arguments re-serialised its own way */
function echo(response: CanonicalResponse): CanonicalMessage {
  return {
    role: 'assistant',
    content: response.content,
    reasoning: response.reasoning,
    ...(response.reasoningSignature ? { reasoningSignature: response.reasoningSignature } : {}),
    toolCalls: response.toolCalls.map((c) => ({
      id: c.id,
      name: c.name,
      arguments: JSON.stringify(
        Object.fromEntries(Object.entries(JSON.parse(c.arguments)).reverse()),
        null,
        1,
      ),
    })),
  };
}

interface Call {
  recorded: Recorded;
  prompt: number[];
  completion: number[];
}

/** an append-only four-call session: tools, tool results, then a new user turn */
async function runSession(backend: TokenBackend): Promise<Call[]> {
  server.reset();
  const state = new Map<string, unknown>();
  const messages: CanonicalMessage[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: [{ type: 'text', text: 'What does a.txt say?' }] },
  ];
  const calls: Call[] = [];
  const results = ['a.txt\nb.txt', 'hello'];
  for (let k = 0; k < sampledTexts.length; k++) {
    const { recorder: rec, recorded } = recorder();
    const { response, events } = await collect(
      backend.generate(request(messages), context(`call${k}`, state, rec)),
    );
    assert.ok(response, `call ${k} finished: ${JSON.stringify(events.at(-1))}`);
    calls.push({
      recorded,
      prompt: recorded.tokens!.promptTokenIds!,
      completion: recorded.tokens!.completionTokenIds!,
    });
    messages.push(echo(response));
    if (k < results.length) {
      messages.push({ role: 'tool', toolCallId: response.toolCalls[0]!.id, content: results[k]! });
    } else if (k === 2) {
      messages.push({ role: 'user', content: [{ type: 'text', text: 'How many lines?' }] });
    }
  }
  return calls;
}

let server: StandIn;
before(async () => {
  tok = await loadChatTokenizer(qwenDir, { allowRemote: false });
  server = await startStandIn(sampledTexts.map((t) => [...tok.encodeFull(t), IM_END]));
});
after(() => server.close());

function backend(splice: boolean, server: StandIn, kind: 'vllm' | 'sglang' = 'vllm'): TokenBackend {
  return new TokenBackend({
    kind: 'tokens',
    tokenizer: tok,
    generator: new HttpCompletions(kind, server.url, 'qwen3'),
    options: { kind: 'tokens', model: 'qwen3', url: server.url },
    splice,
  });
}

describe('tokens backend: splicing over a multi-turn Qwen3 session (thinking on)', () => {
  it('every call extends the previous prompt + completion exactly', async () => {
    const calls = await runSession(backend(true, server));
    for (let k = 1; k < calls.length; k++) {
      const prev = calls[k - 1]!;
      assert.ok(
        isPrefix([...prev.prompt, ...prev.completion], calls[k]!.prompt),
        `call ${k} extends call ${k - 1}`,
      );
      const info = calls[k]!.recorded.info;
      assert.equal((info.prompt as { extends_call: string }).extends_call, `call${k - 1}`);
      const splices = info.splices as { turn: number; tokens: number }[];
      assert.equal(splices.length, k, `call ${k} splices all ${k} earlier assistant turns`);
    }
    // the last call comes after a new user turn: Qwen3's template drops the earlier <think> blocks,
    // polar records that and splices the sampled ids back
    const mismatches = calls[3]!.recorded.info.render_mismatches as {
      turn: number;
      reason: string;
      spliced: boolean;
    }[];
    assert.ok(mismatches.some((m) => m.spliced && /dropped the turn's <think> block/.test(m.reason)));
    // the request went out as token ids
    const body = calls[3]!.recorded.body as { prompt: number[]; return_token_ids: boolean };
    assert.deepEqual(body.prompt, calls[3]!.prompt);
    assert.equal(body.return_token_ids, true);
    assert.equal(calls[0]!.recorded.tokens!.completionLogprobs!.length, calls[0]!.completion.length);
  });

  it('plain template re-rendering diverges where the template rewrites history', async () => {
    const calls = await runSession(backend(false, server));
    const extends_ = calls
      .slice(1)
      .map((c, k) => isPrefix([...calls[k]!.prompt, ...calls[k]!.completion], c.prompt));
    // the new user turn makes the template drop earlier <think> blocks: call 3 no longer extends call 2
    assert.equal(extends_[2], false);
    assert.ok(extends_.includes(false));
    const think = tok.encodeFull('<think>\nI should list the files first.\n</think>');
    const has = (ids: number[]) => ids.some((_, i) => think.every((t, j) => ids[i + j] === t));
    assert.ok(has(calls[2]!.prompt));
    assert.ok(!has(calls[3]!.prompt));
  });

  it('parses tool calls into the finish response and mints ids and a signature', async () => {
    const { recorder: rec } = recorder();
    const { events, response } = await collect(
      backend(true, server).generate(
        request([{ role: 'user', content: [{ type: 'text', text: 'go' }] }]),
        context('solo', new Map(), rec),
      ),
    );
    assert.equal(events[0]!.type, 'start');
    assert.ok(response);
    assert.equal(response.finishReason, 'tool_calls');
    assert.equal(response.toolCalls.length, 1);
    assert.match(response.toolCalls[0]!.id, /^call_/);
    assert.match(response.reasoningSignature ?? '', /^psig_/);
    assert.ok(events.some((e) => e.type === 'reasoning-delta'));
    assert.deepEqual(
      events.filter((e) => e.type.startsWith('tool-call')).map((e) => e.type),
      ['tool-call-start', 'tool-call-delta', 'tool-call-end'],
    );
  });
});

describe('tokens backend: matching turns', () => {
  it('splices a plain-text turn by content, and refuses an edited turn that carries our ids', async () => {
    const local = await startStandIn([
      [...tok.encodeFull('<think>\nx\n</think>\n\nHello   there.'), IM_END],
      [...tok.encodeFull('<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>'), IM_END],
      [...tok.encodeFull('ok'), IM_END],
    ]);
    try {
      const b = backend(true, local);
      const state = new Map<string, unknown>();
      const user = (text: string): CanonicalMessage => ({ role: 'user', content: [{ type: 'text', text }] });
      const messages: CanonicalMessage[] = [user('hi')];
      const r1 = (await collect(b.generate(request(messages), context('c1', state, recorder().recorder))))
        .response!;
      // the harness drops reasoning and signature and trims nothing: only content identifies the turn
      messages.push({ role: 'assistant', content: r1.content, toolCalls: [] }, user('run ls'));
      const rec2 = recorder();
      const r2 = (await collect(b.generate(request(messages), context('c2', state, rec2.recorder))))
        .response!;
      assert.deepEqual(
        (rec2.recorded.info.splices as { matched_by: string }[]).map((s) => s.matched_by),
        ['content'],
      );
      // now the harness edits the tool call it got back (same id, other arguments)
      messages.push(
        {
          role: 'assistant',
          content: '',
          toolCalls: [{ ...r2.toolCalls[0]!, arguments: '{"cmd":"rm -rf /"}' }],
        },
        { role: 'tool', toolCallId: r2.toolCalls[0]!.id, content: 'done' },
      );
      const rec3 = recorder();
      await collect(b.generate(request(messages), context('c3', state, rec3.recorder)));
      const splices = rec3.recorded.info.splices as { turn: number }[];
      const mismatches = rec3.recorded.info.render_mismatches as {
        turn: number;
        reason: string;
        spliced: boolean;
      }[];
      assert.deepEqual(
        splices.map((s) => s.turn),
        [1],
      );
      const edited = mismatches.find((m) => m.turn === 3);
      assert.ok(
        edited && !edited.spliced && /other arguments/.test(edited.reason),
        JSON.stringify(mismatches),
      );
      // the edited turn is rendered by the template, as the harness sent it
      assert.ok(tok.decode(rec3.recorded.tokens!.promptTokenIds!).includes('"rm -rf /"'));
    } finally {
      await local.close();
    }
  });
});

describe('tokens backend: servers and faults', () => {
  it('speaks SGLang /generate', async () => {
    const calls = await runSession(backend(true, server, 'sglang'));
    assert.ok(server.paths.includes('/generate'));
    const body = calls[1]!.recorded.body as { input_ids: number[]; return_logprob: boolean };
    assert.deepEqual(body.input_ids, calls[1]!.prompt);
    assert.equal(body.return_logprob, true);
    assert.ok(isPrefix([...calls[0]!.prompt, ...calls[0]!.completion], calls[1]!.prompt));
  });

  it('turns an unreachable server into an error event, not a throw', async () => {
    const dead = await startStandIn([[1]]);
    await dead.close();
    const b = backend(true, dead);
    const { events } = await collect(
      b.generate(
        request([{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]),
        context('x', new Map(), recorder().recorder),
      ),
    );
    assert.equal(events[0]!.type, 'start');
    const last = events.at(-1)!;
    assert.equal(last.type, 'error');
    assert.equal(last.type === 'error' && last.error.kind, 'backend_unreachable');
  });

  it('counts prompt tokens exactly', async () => {
    const b = backend(true, server);
    const req = request([{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
    const count = await b.countTokens(req, context('x', new Map(), recorder().recorder));
    assert.equal(count.exact, true);
    assert.equal(
      count.tokens,
      tok.encodeFull(
        tok.render([{ role: 'user', content: 'hi' }], [{ type: 'function', function: tools[0]! }], {}),
      ).length,
    );
  });
});

describe('tokens backend: --seed', () => {
  /** a generator that answers <|im_end|> at once and remembers the seed each call asked for */
  function seedRecorder(): { generator: TokenGenerator; seeds: (number | undefined)[] } {
    const seeds: (number | undefined)[] = [];
    const generator: TokenGenerator = {
      kind: 'vllm',
      url: null,
      model: 'qwen3',
      async *generate(params: GenerateParams) {
        seeds.push(params.seed);
        yield { ids: [IM_END], logprobs: [-0.1] };
        return { finishReason: 'stop' as const, serverPromptIds: null };
      },
      async close() {},
    };
    return { generator, seeds };
  }
  const ask = async (b: TokenBackend, n: number) => {
    for (let k = 0; k < n; k++) {
      const { recorder: rec } = recorder();
      const question: CanonicalMessage = { role: 'user', content: [{ type: 'text', text: 'hi' }] };
      const { response } = await collect(b.generate(request([question]), context(`c${k}`, new Map(), rec)));
      assert.ok(response);
    }
  };

  it('call k samples with seed + k; without --seed no seed is sent', async () => {
    const seeded = seedRecorder();
    const options = { kind: 'tokens' as const, model: 'qwen3', seed: 100 };
    await ask(new TokenBackend({ kind: 'tokens', tokenizer: tok, generator: seeded.generator, options }), 3);
    assert.deepEqual(seeded.seeds, [100, 101, 102]);
    const plain = seedRecorder();
    const unseeded = { kind: 'tokens' as const, model: 'qwen3' };
    await ask(
      new TokenBackend({ kind: 'tokens', tokenizer: tok, generator: plain.generator, options: unseeded }),
      2,
    );
    assert.deepEqual(plain.seeds, [undefined, undefined]);
  });
});
