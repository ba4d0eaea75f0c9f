/**
 * Real Gemini CLI (`@google/gemini-cli`, from npm) under `polar capture` with no flags of its own but the
 * prompt: the Gemini API (`:streamGenerateContent?alt=sse`) through polar's gemini front, against the
 * vLLM stand-in.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { capture } from '../support/capture-run.ts';
import { type Standin, startStandin } from '../support/vllm-standin.ts';
import { assertTokensMatch, assertToolRoundTrip } from './harness-suite.ts';

const BACKEND = (url: string) => ['--backend', 'vllm', '--backend-url', url, '--model', 'Qwen/Qwen3-4B'];
const TIMEOUT = { timeoutMs: 300_000 };

describe('gemini', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin();
  });
  after(() => standin.close());

  test('plain answer', async () => {
    const from = standin.calls.length;
    const r = await capture(BACKEND(standin.url), ['gemini', '-p', 'Say hello'], {
      ...TIMEOUT,
      traceConnects: true,
    });
    assert.equal(r.exitCode, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /Hello from the stand-in\./);
    assert.equal(r.session.harness, 'gemini');
    // telemetry, update checks, IDE integration off: nothing but polar's proxy and the stand-in
    assert.deepEqual(r.outsideConnects, [], 'connections that left the machine');
    assert.ok(r.calls.length >= 1);
    assert.ok(r.calls.every((c) => c.api === 'gemini' && c.stream));
    const first = r.calls[0]!;
    // the model is named in the path (with its slash), the key in x-goog-api-key (recorded redacted)
    assert.match(first.request.path, /^\/v1beta\/models\/Qwen\/Qwen3-4B:streamGenerateContent\?alt=sse$/);
    assert.equal(first.request.headers['x-goog-api-key'], '<redacted>');
    assert.match(first.request.headers['user-agent'] ?? '', /^GeminiCLI/);
    const body = first.request.body as { systemInstruction: { parts: Array<{ text: string }> } };
    assert.match(body.systemInstruction.parts[0]!.text, /Gemini CLI/, "Gemini CLI's own system prompt");
    assert.equal(first.harness_meta.request_kind, undefined, 'the first call is an ordinary turn');
    assertTokensMatch(r.calls, standin, from);
  });

  test('tool call round trip through run_shell_command', async () => {
    const from = standin.calls.length;
    const r = await capture(BACKEND(standin.url), ['gemini', '--yolo', '-p', 'ECHO polarbear'], TIMEOUT);
    assert.equal(r.exitCode, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /Done\. Output:/);
    assertToolRoundTrip(r.calls, 'polarbear');
    // the function call went out with polar's id and signature, and both came back with its response
    const turn = r.calls.find((c) => c.finish_reason === 'tool_calls')!;
    const call = (turn.canonical_response as { toolCalls: Array<{ id: string }> }).toolCalls[0]!;
    const next = JSON.stringify(r.calls[r.calls.indexOf(turn) + 1]?.request.body);
    assert.ok(
      next.includes(`"id":"${call.id}"`),
      'functionCall / functionResponse carry the id polar minted',
    );
    assert.ok(next.includes(`"thoughtSignature":"polar.${turn.id}"`), 'the signature polar minted came back');
    assertTokensMatch(r.calls, standin, from);
  });
});
