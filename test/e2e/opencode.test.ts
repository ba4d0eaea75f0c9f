/**
 * Real OpenCode (`opencode-ai`, from npm: the native binary its postinstall links) under `polar capture`
 * with no flags of its own but the prompt: a `polar` provider in its private config, OpenAI Chat
 * Completions against the vLLM stand-in.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { capture } from '../support/capture-run.ts';
import { type Standin, startStandin } from '../support/vllm-standin.ts';
import { assertTokensMatch, assertToolRoundTrip } from './harness-suite.ts';

const BACKEND = (url: string) => ['--backend', 'vllm', '--backend-url', url, '--model', 'Qwen/Qwen3-4B'];
// OpenCode (a Bun binary) starts slowly on a loaded 2-core machine: minutes, not seconds
const TIMEOUT = { timeoutMs: 420_000 };

describe('opencode', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin();
  });
  after(() => standin.close());

  test('plain answer', async () => {
    const from = standin.calls.length;
    const r = await capture(BACKEND(standin.url), ['opencode', 'run', 'Say hello'], {
      ...TIMEOUT,
      traceConnects: true,
    });
    assert.equal(r.exitCode, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /Hello from the stand-in\./);
    assert.equal(r.session.harness, 'opencode');
    // models.dev, updates, sharing, the config dir's plugin install off: nothing but polar's proxy
    assert.deepEqual(r.outsideConnects, [], 'connections that left the machine');
    assert.ok(r.calls.every((c) => c.api === 'openai-chat' && c.stream));
    const turns = r.calls.filter((c) => c.harness_meta.request_kind === undefined);
    assert.equal(turns.length, 1, 'one agent turn');
    const body = turns[0]!.request.body as { model: string; messages: Array<{ content: unknown }> };
    assert.equal(body.model, 'Qwen/Qwen3-4B', 'opencode asked for the model polar set for the run');
    assert.match(JSON.stringify(body.messages[0]), /You are opencode/, "OpenCode's own system prompt");
    assert.match(String(turns[0]!.request.headers['user-agent']), /^opencode\//);
    assert.match(String(turns[0]!.harness_meta.thread_id), /^ses_/, 'its session id (x-session-id)');
    // the session title is a side call of its own
    for (const c of r.calls.filter((c) => c !== turns[0]))
      assert.equal(c.harness_meta.request_kind, 'title', JSON.stringify(c.canonical_request).slice(0, 200));
    assertTokensMatch(r.calls, standin, from);
  });

  test('tool call round trip through bash', async () => {
    const from = standin.calls.length;
    const r = await capture(BACKEND(standin.url), ['opencode', 'run', 'ECHO polarbear'], TIMEOUT);
    assert.equal(r.exitCode, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /Done\. Output: polarbear/);
    assertToolRoundTrip(r.calls, 'polarbear');
    assertTokensMatch(r.calls, standin, from);
  });
});
