/**
 * Real harnesses against stand-ins that transcribe the real servers' behaviour (test/support/vllm-standin.ts):
 * - Pi through a vLLM that drops the ids of streamed tool-call chunks (vllm-project/vllm#27482): no call is
 *   recorded token_exact with wrong ids, the user is told once, and `polar build` counts the calls by cause;
 * - Claude Code asks max_tokens 32000: against a 40960-token context its tool round trip finishes, each
 *   call fitted to what its prompt leaves;
 * - Claude Code and Codex against a context their prompt does not fit: the vendor's own error, which
 *   each recognises ("prompt is too long", "ran out of room in the model's context window");
 * - Pi and Claude Code through NeMo RL's generation server: every call contiguous.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { capture } from '../support/capture-run.ts';
import { runPolar } from '../support/cli.ts';
import { type StandinOptions, startStandin } from '../support/vllm-standin.ts';
import { assertToolRoundTrip } from './harness-suite.ts';

const MODEL = 'Qwen/Qwen3-4B';
const BACKEND = (url: string) => ['--backend', 'vllm', '--backend-url', url, '--model', MODEL];

async function withStandin<T>(
  options: StandinOptions,
  body: (s: Awaited<ReturnType<typeof startStandin>>) => Promise<T>,
) {
  const standin = await startStandin(options);
  try {
    return await body(standin);
  } finally {
    await standin.close();
  }
}

describe('vLLM that drops tool-parser ids (#27482)', () => {
  test('pi: no token_exact call with wrong ids; told once; build counts the calls by cause', async () => {
    await withStandin({ dropToolParserIds: true }, async (standin) => {
      const r = await capture(
        [...BACKEND(standin.url), '--pi-api', 'openai-completions'],
        ['pi', '-p', 'ECHO polarbear'],
      );
      assert.equal(r.exitCode, 0, r.stderr);
      assert.match(r.stdout, /Done\. Output: polarbear/);
      assertToolRoundTrip(r.calls, 'polarbear');
      const model = r.calls.filter((c) => c.error === null);
      assert.equal(model.length, standin.calls.length);
      let inexact = 0;
      model.forEach((call, i) => {
        const truth = standin.calls[i]!;
        if (call.token_exact) {
          assert.deepEqual(
            call.completion_token_ids,
            truth.completionIds,
            `call ${i}: exact means the true ids`,
          );
          assert.deepEqual(call.prompt_token_ids, truth.promptIds);
        } else {
          inexact++;
          assert.notDeepEqual(call.completion_token_ids, truth.completionIds);
          assert.equal(
            (call.backend_info?.token_inexact as { cause: string }).cause,
            'ids_dropped_by_server',
          );
        }
      });
      assert.equal(inexact, 1, 'the tool-call turn, and only it');
      assert.equal(r.stderr.match(/PR #29074/g)?.length, 1, `told once:\n${r.stderr}`);
      const build = await runPolar(['build', r.file, '--stats']);
      assert.equal(build.exitCode, 0, String(build.stderr));
      assert.match(`${build.stdout}\n${build.stderr}`, /calls not token-exact\s+ids_dropped_by_server 1/);
    });
  });
});

describe('context length and a harness max_tokens of 32000', () => {
  test('claude: with a 40960-token context the tool round trip finishes, every call fitted', async () => {
    await withStandin({ maxModelLen: 40960 }, async (standin) => {
      const r = await capture(BACKEND(standin.url), [
        'claude',
        '-p',
        'ECHO polarbear',
        '--dangerously-skip-permissions',
      ]);
      assert.equal(r.exitCode, 0, r.stderr + r.stdout);
      assert.match(r.stdout, /Done\. Output: polarbear/);
      assertToolRoundTrip(r.calls, 'polarbear');
      const model = r.calls.filter((c) => c.api === 'anthropic-messages');
      assert.ok(model.every((c) => c.error === null && c.token_exact));
      const fitted = model.filter((c) => c.backend_info?.max_tokens_fit);
      assert.ok(fitted.length >= 2, 'the main-loop calls asked 32000 and were fitted');
      for (const c of fitted) {
        const fit = c.backend_info!.max_tokens_fit as { asked: number; sent: number; prompt_tokens: number };
        assert.equal(fit.asked, 32000);
        assert.equal(fit.sent, 40960 - fit.prompt_tokens);
        assert.equal(
          fit.prompt_tokens,
          c.prompt_token_ids!.length,
          'vLLM /tokenize counted the prompt the server used',
        );
      }
      for (const call of standin.calls) {
        const asked = call.body.max_tokens as number;
        assert.ok(call.promptIds.length + asked <= 40960);
      }
    });
  });

  test("claude: a prompt over the context gets Anthropic's own prompt-is-too-long error", async () => {
    await withStandin({ maxModelLen: 4096 }, async (standin) => {
      const r = await capture(BACKEND(standin.url), [
        'claude',
        '-p',
        'ECHO polarbear',
        '--dangerously-skip-permissions',
      ]);
      assert.notEqual(r.exitCode, 0);
      assert.match(r.stdout + r.stderr, /prompt is too long/i);
      const failed = r.calls.filter((c) => c.error !== null);
      assert.ok(failed.length >= 1);
      for (const c of failed) {
        assert.equal(c.error!.kind, 'context_length_exceeded');
        assert.equal(c.response.status, 400);
        assert.equal((c.response.body as { error: { type: string } }).error.type, 'invalid_request_error');
      }
      assert.equal(standin.calls.length, 0, 'nothing was generated');
    });
  });
});

describe('context overflow: Codex', () => {
  test("a prompt over the context is OpenAI's context_length_exceeded, which Codex recognises", async () => {
    await withStandin({ maxModelLen: 2048 }, async (standin) => {
      const r = await capture(BACKEND(standin.url), [
        'codex',
        'exec',
        '--skip-git-repo-check',
        '--dangerously-bypass-approvals-and-sandbox',
        '--ephemeral',
        'ECHO polarbear',
      ]);
      assert.notEqual(r.exitCode, 0);
      assert.match(r.stderr, /ran out of room in the model's context window/);
      const failed = r.calls.filter((c) => c.error !== null);
      assert.ok(failed.length >= 1);
      for (const c of failed) {
        assert.equal(c.error!.kind, 'context_length_exceeded');
        assert.equal((c.response.body as { error: { code: string } }).error.code, 'context_length_exceeded');
      }
      assert.equal(standin.calls.length, 0);
    });
  });
});

describe("NeMo RL's generation server", () => {
  for (const [name, args, argv] of [
    ['pi', ['--pi-api', 'openai-completions'], ['pi', '-p', 'ECHO polarbear']],
    ['claude', [], ['claude', '-p', 'ECHO polarbear', '--dangerously-skip-permissions']],
  ] as const) {
    test(`${name}: every call continues the previous prompt + generation (thinking on)`, async () => {
      const { startNemoRlStandin } = await import('../support/nemo-rl-standin.ts');
      const standin = await startNemoRlStandin();
      try {
        const r = await capture(
          ['--backend', 'nemo-rl', '--backend-url', standin.url, '--model', MODEL, ...args],
          [...argv],
        );
        assert.equal(r.exitCode, 0, r.stderr + r.stdout);
        assert.match(r.stdout, /Done\. Output: polarbear/);
        const main = r.calls.filter(
          (c) =>
            c.api !== 'anthropic-count-tokens' &&
            c.error === null &&
            (c.canonical_request as { tools: unknown[] }).tools.length > 0,
        );
        assert.ok(main.length >= 2);
        for (let k = 1; k < main.length; k++) {
          const prev = [...main[k - 1]!.prompt_token_ids!, ...main[k - 1]!.completion_token_ids!];
          assert.deepEqual(
            main[k]!.prompt_token_ids!.slice(0, prev.length),
            prev,
            `call ${k + 1} extends call ${k}`,
          );
          assert.equal((main[k]!.backend_info?.prefix as { mode: string }).mode, 'prefix_ids');
        }
        assert.ok(r.calls.every((c) => c.error === null || c.api === 'anthropic-count-tokens'));
      } finally {
        await standin.close();
      }
    });
  }
});
