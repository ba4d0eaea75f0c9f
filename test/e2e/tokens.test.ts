/**
 * Real Pi (from npm) under `polar capture` with the token-in/token-out backends:
 * a. `--backend tokens` against a vLLM /v1/completions stand-in with the real Qwen3 tokenizer: a
 *    thinking, two-tool-call session whose every prompt extends the previous prompt + completion;
 * b. the same session through `--backend vllm` (chat endpoint, the stand-in renders with Qwen3's
 *    template server-side): where and why the re-rendered history diverges from what was sampled;
 * c. `--backend embedded` with the tiny random model, offline.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ensureTinyModel, IM_END } from '../../scripts/make-tiny-model.ts';
import type { CallRecord } from '../../src/capture/record.ts';
import type { CanonicalRequest } from '../../src/protocols/canonical.ts';
import { type ChatTokenizer, loadChatTokenizer } from '../../src/tokenizer/chat-tokenizer.ts';
import { toTemplateMessages, toTemplateTools } from '../../src/tokenizer/messages.ts';
import { capture } from '../support/capture-run.ts';
import { ROOT } from '../support/cli.ts';
import { type StandIn, startCompletionsStandIn } from '../support/completions-standin.ts';
import { qwenTokenizerDir } from '../support/qwen-tokenizer.ts';
import { rescore } from '../support/tiny-model.ts';
import { type ChatBody, pyJson, type Reply, type Standin, startStandin } from '../support/vllm-standin.ts';
import { assertTokensMatch, assertToolRoundTrip } from './harness-suite.ts';

const MODEL = 'Qwen/Qwen3-4B';
const WORDS = ['polar-one', 'polar-two'];
const REASONING = [
  'The user wants two commands run. First: echo polar-one.',
  'That printed polar-one. Now the second: echo polar-two.',
  'Both commands ran; report their output.',
  'The follow-up asks which output came first: polar-one.',
];
/** two user queries: the first takes two tool calls and an answer, the follow-up one more answer */
const PROMPTS = [
  'Run echo polar-one, then echo polar-two, then tell me what they printed.',
  'Which of the two came first?',
];
const FOLLOW_UP = 'polar-one came first.';

/**
 * What the "model" does at each step, decided by the conversation so far: the number of user
 * queries, and the tool results after the last one.
 */
function reply(queries: number, results: string[]): Reply {
  if (queries >= 2) return { reasoning: REASONING[3]!, content: FOLLOW_UP };
  const k = Math.min(results.length, 2);
  if (k < 2) {
    return {
      reasoning: REASONING[k]!,
      toolCalls: [{ name: 'bash', arguments: { command: `echo ${WORDS[k]}` } }],
    };
  }
  const last = results.map((r) => r.trim().split('\n').at(-1)?.trim() ?? '');
  return { reasoning: REASONING[2]!, content: `Done. Outputs: ${last.join(' ')}` };
}

/**
 * What the model samples for a reply, in Qwen3's syntax, byte for byte what test/support/vllm-standin.ts
 * samples for it (so both backends see the same completions): `<think>\n…\n</think>\n\n`, the content,
 * and tool calls as `<tool_call>\n{JSON}\n</tool_call>` in the template's own tojson form (a model
 * trained on the template writes them so).
 */
function sampledText(r: Reply): string {
  const think = r.reasoning ? `<think>\n${r.reasoning}\n</think>\n\n` : '';
  const calls = (r.toolCalls ?? []).map(
    (c) => `<tool_call>\n${pyJson({ name: c.name, arguments: c.arguments })}\n</tool_call>`,
  );
  const content = r.content ?? '';
  return think + content + (calls.length ? (content ? '\n' : '') + calls.join('\n') : '');
}

/** /v1/completions policy: reads the queries and tool results out of the decoded prompt */
function completionsPolicy(prompt: string): string {
  assert.match(prompt, /"name": "bash"/, "the prompt lists Pi's bash tool");
  const queries = [...prompt.matchAll(/<\|im_start\|>user\n(?!<tool_response>)/g)].length;
  const afterLast = prompt.slice(prompt.lastIndexOf(`<|im_start|>user\n${PROMPTS[0]}`));
  const results = [...afterLast.matchAll(/<tool_response>\n([\s\S]*?)\n<\/tool_response>/g)].map(
    (m) => m[1]!,
  );
  return sampledText(reply(queries, results));
}

/** chat policy: reads the same out of the messages */
function chatPolicy(body: ChatBody): Reply {
  const queries = body.messages.filter((m) => m.role === 'user').length;
  const results = body.messages
    .filter((m) => m.role === 'tool')
    .map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)));
  return reply(queries, results);
}

function isPrefix(prefix: number[], ids: number[]): boolean {
  return prefix.length <= ids.length && prefix.every((v, i) => ids[i] === v);
}

const modelCalls = (calls: CallRecord[]) => calls.filter((c) => c.error === null);

let tok: ChatTokenizer;
before(async () => {
  tok = await loadChatTokenizer(qwenTokenizerDir(), { allowRemote: false });
});

/** the four completions of the session, as text */
const EXPECTED = [
  reply(1, []),
  reply(1, ['polar-one']),
  reply(1, ['polar-one', 'polar-two']),
  reply(2, []),
].map((r) => `${sampledText(r)}<|im_end|>`);

type Info = {
  prompt: {
    mode: string;
    extends_call: string | null;
    tokens: number;
    rendered_chars: number;
    prompt_chars: number;
  };
  splices: { turn: number; tokens: number; matched_by: string; call: string; rendered_tokens: number }[];
  render_mismatches: { turn: number; reason: string; spliced: boolean }[];
};

/** canonical message index of the j-th assistant turn: [system, user, a0, tool, a1, tool, a2, user] */
const ASSISTANT_TURNS = [2, 4, 6];

describe('pi under --backend tokens (vLLM /v1/completions stand-in, Qwen3 thinking on)', () => {
  let standin: StandIn;
  before(async () => {
    standin = await startCompletionsStandIn({ policy: completionsPolicy, chunkTokens: 3 });
  });
  after(() => standin.close());

  test('two tool calls, an answer and a follow-up: every prompt extends the previous prompt + completion', async () => {
    const r = await capture(
      [
        '--backend',
        'tokens',
        '--backend-url',
        standin.url,
        '--tokenizer',
        qwenTokenizerDir(),
        '--model',
        MODEL,
      ],
      ['pi', '-p', ...PROMPTS],
    );
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.end?.status, 'completed');
    assert.equal(r.session.backend.kind, 'tokens');
    assert.equal(r.session.backend.token_exact, true);
    const calls = modelCalls(r.calls);
    assert.equal(calls.length, 4, 'two tool calls, the answer, the follow-up answer');
    assert.equal(standin.calls.length, 4, 'one /v1/completions request per call');
    assert.deepEqual(
      calls.map((c) => c.finish_reason),
      ['tool_calls', 'tool_calls', 'stop', 'stop'],
    );
    assert.deepEqual(
      calls.map((c) => tok.decode(c.completion_token_ids!)),
      EXPECTED,
    );

    // the tool round trip: Pi ran both echos through its bash tool, the outputs came back in the next
    // prompts, and the answer the stand-in built from them reached Pi's stdout
    assertToolRoundTrip(calls, 'polar-one');
    assert.match(decoded(calls[1]!), /<tool_response>\npolar-one\n*<\/tool_response>/);
    assert.match(decoded(calls[2]!), /<tool_response>\npolar-two\n*<\/tool_response>/);
    // Pi prints the last answer; the first one (built from both tool outputs) is in the last prompt
    assert.equal(r.stdout.trim(), FOLLOW_UP);
    assert.ok(decoded(calls[3]!).includes('Done. Outputs: polar-one polar-two<|im_end|>'));

    const header = tok.encode('assistant\n');
    calls.forEach((call, k) => {
      const served = standin.calls[k]!;
      // ids are exactly what went to and came from the server, one logprob per sampled id
      assert.equal(call.token_exact, true);
      assert.deepEqual(call.prompt_token_ids, served.promptIds, `call ${k}: prompt ids sent`);
      assert.deepEqual(call.completion_token_ids, served.completionIds, `call ${k}: sampled ids`);
      assert.deepEqual(call.completion_logprobs, served.logprobs, `call ${k}: logprobs`);
      // the server got token ids, not text
      assert.deepEqual(served.body.prompt, call.prompt_token_ids);
      assert.equal(served.body.return_token_ids, true);

      const info = call.backend_info as Info;
      assert.equal(info.prompt.tokens, call.prompt_token_ids!.length);
      if (k === 0) {
        assert.equal(info.prompt.mode, 'rendered');
        assert.equal(info.splices.length, 0);
        return;
      }
      const prev = calls[k - 1]!;
      // exact token extension: this prompt starts with the previous prompt + what was sampled
      assert.ok(
        isPrefix([...prev.prompt_token_ids!, ...prev.completion_token_ids!], call.prompt_token_ids!),
        `call ${k} prompt extends call ${k - 1}'s prompt + completion`,
      );
      assert.equal(info.prompt.mode, 'spliced');
      assert.equal(info.prompt.extends_call, prev.id);
      // each earlier assistant turn was spliced from the call that sampled it, found by the tool call
      // id polar minted (turns with tool calls) or by content (the plain answer), as Pi sent them back
      assert.deepEqual(
        info.splices.map((s) => [s.turn, s.call, s.matched_by]),
        calls.slice(0, k).map((c, j) => [ASSISTANT_TURNS[j], c.id, j < 2 ? 'tool_call_id' : 'content']),
      );
      // a splice is the generation prompt's `assistant\n` + the sampled ids (which end in <|im_end|>)
      info.splices.forEach((s, j) => {
        assert.equal(s.tokens, header.length + calls[j]!.completion_token_ids!.length);
      });
      // incremental rendering: within the first query only the new messages went through the template;
      // the follow-up query can rewrite history (the think-dropping rule), so that call renders in full
      if (k < 3)
        assert.ok(info.prompt.rendered_chars < info.prompt.prompt_chars / 2, `call ${k} incremental`);
      else assert.equal(info.prompt.rendered_chars, info.prompt.prompt_chars);
      if (k < 3) {
        // one user query so far: Qwen3's template re-renders these turns as sampled (see the vllm test)
        assert.deepEqual(info.render_mismatches, []);
        for (const s of info.splices) assert.equal(s.rendered_tokens, s.tokens);
      } else {
        // after the follow-up the template drops the <think> blocks of the turns before it: the splices
        // put the sampled ids back, and the record says what they repaired
        assert.deepEqual(
          info.render_mismatches.map((m) => [m.turn, m.spliced, m.reason]),
          ASSISTANT_TURNS.map((t) => [t, true, "the template dropped the turn's <think> block"]),
        );
        for (const s of info.splices) assert.ok(s.rendered_tokens < s.tokens);
        assert.ok(
          REASONING.slice(0, 3).every((text) => decoded(call).includes(`<think>\n${text}\n</think>`)),
        );
      }
    });
  });
});

describe('the same session through --backend vllm (chat endpoint, real Qwen3 template server-side)', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin({ policy: chatPolicy });
  });
  after(() => standin.close());

  test('re-rendered history diverges where the template drops <think> blocks (after the follow-up)', async () => {
    const r = await capture(
      ['--backend', 'vllm', '--backend-url', standin.url, '--model', MODEL],
      ['pi', '-p', ...PROMPTS],
    );
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.stdout.trim(), FOLLOW_UP);
    const calls = modelCalls(r.calls);
    assert.equal(calls.length, 4);
    assertTokensMatch(calls, standin);
    // the model sampled the same texts as in the tokens session
    assert.deepEqual(
      calls.map((c) => tok.decode(c.completion_token_ids!)),
      EXPECTED,
    );
    const extended = (k: number) =>
      isPrefix(
        [...calls[k - 1]!.prompt_token_ids!, ...calls[k - 1]!.completion_token_ids!],
        calls[k]!.prompt_token_ids!,
      );

    // Within the first query the server's re-rendering IS append-only, token for token. Qwen3's
    // template keeps the reasoning of assistant turns after the last user query (Pi sends it back as
    // reasoning_content), and re-renders each tool call as `{"name": …, "arguments": <tojson>}`, which
    // is exactly what this model sampled. (A model that wrote other JSON whitespace or key order would
    // diverge here too; this one does not, so that is not asserted.)
    assert.equal(extended(1), true);
    assert.equal(extended(2), true);

    // The follow-up query moves the template's `last_query_index`: every assistant turn before it is
    // now rendered without its <think> block (`reasoning_content` is only rendered for turns after the
    // last user query), so call 3's prompt no longer contains what calls 0-2 sampled.
    assert.equal(extended(3), false);
    const sampled = [...calls[2]!.prompt_token_ids!, ...calls[2]!.completion_token_ids!];
    const prompt = calls[3]!.prompt_token_ids!;
    const at = firstDifference(sampled, prompt);
    // the first difference is right after the first assistant turn's `<|im_start|>assistant\n`, where
    // the sampled `<think>` is and the re-rendered turn starts with its `<tool_call>`
    assert.equal(at, calls[0]!.prompt_token_ids!.length);
    assert.equal(sampled[at], tok.tokenId('<think>'));
    assert.equal(prompt[at], tok.tokenId('<tool_call>'));
    const text = tok.decode(prompt);
    for (const reasoning of REASONING.slice(0, 3)) assert.ok(!text.includes(reasoning), reasoning);
    // and that is the only difference: the sampled history with its <think> blocks cut out is exactly
    // the prefix the server rendered
    const withoutThink = tok.decode(sampled).replace(/<think>\n[\s\S]*?\n<\/think>\n\n/g, '');
    assert.ok(text.startsWith(withoutThink), 'only the <think> blocks differ');
    // the call's own generation prompt still opens a fresh think block in the model (the template does
    // not force one): the follow-up answer was sampled with reasoning
    assert.match(tok.decode(calls[3]!.completion_token_ids!), /^<think>\n/);
  });
});

describe('pi under --backend embedded with the tiny model (offline)', () => {
  const modelDir = join(ROOT, 'fixtures/models/tiny-qwen3-stop');
  before(() => {
    // the stop bias makes the random model end its turns after a few tokens (Pi asks for 8192)
    ensureTinyModel(modelDir, { logitBias: { [IM_END]: 23 } });
  });

  test('answers pi -p "hi" end to end with token-exact ids and logprobs', async () => {
    const r = await capture(['--backend', 'embedded', '--model', modelDir], ['pi', '-p', 'hi'], {
      env: { POLAR_OFFLINE: '1', POLAR_EMBEDDED_THREADS: '1' },
    });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.end?.status, 'completed');
    assert.equal(r.session.backend.kind, 'embedded');
    assert.equal(r.session.backend.token_exact, true);
    const calls = modelCalls(r.calls);
    assert.ok(calls.length >= 1);
    const call = calls[0]!;
    assert.equal(call.token_exact, true);
    const ids = call.completion_token_ids!;
    const lps = call.completion_logprobs!;
    assert.ok(ids.length >= 1 && ids.length <= 8192);
    assert.equal(lps.length, ids.length, 'one logprob per sampled id');
    assert.ok(
      lps.every((lp) => Number.isFinite(lp) && lp <= 0),
      'logprobs are log probabilities',
    );
    const vocab = (JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8')) as { vocab_size: number })
      .vocab_size;
    assert.ok([...call.prompt_token_ids!, ...ids].every((t) => Number.isInteger(t) && t >= 0 && t < vocab));
    // the prompt is the tokens backend's rendering of Pi's request (Qwen3 template, Pi's tools)
    const request = call.canonical_request as CanonicalRequest;
    const expected = tok.encodeFull(
      tok.render(toTemplateMessages(request.messages), toTemplateTools(request.tools), {}),
    );
    assert.deepEqual(call.prompt_token_ids, expected);
    assert.match(
      tok.decode(call.prompt_token_ids!),
      /<\|im_start\|>user\nhi<\|im_end\|>\n<\|im_start\|>assistant\n$/,
    );
    // the ids are the model's: re-scoring them with a cache-free forward pass gives the recorded
    // logprobs (temperature 1, top-p 1: the sampling distribution is the model's own)
    const scored = await rescore(modelDir, call.prompt_token_ids!, ids);
    for (const [i, s] of scored.entries()) {
      assert.ok(Math.abs(s - lps[i]!) < 1e-3, `token ${i}: ${s} vs ${lps[i]}`);
    }
  });
});

function decoded(call: CallRecord): string {
  return tok.decode(call.prompt_token_ids!);
}

function firstDifference(a: number[], b: number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
