/** Real Claude Code (from npm) under `polar capture` with no provider flags of its own. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { capture } from '../support/capture-run.ts';
import { type Standin, startStandin } from '../support/vllm-standin.ts';
import { assertTokensMatch, assertToolRoundTrip } from './harness-assert.ts';

const BACKEND = (url: string) => ['--backend', 'vllm', '--backend-url', url, '--model', 'Qwen/Qwen3-4B'];

describe('claude', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin();
  });
  after(() => standin.close());

  test('plain answer', async () => {
    const from = standin.calls.length;
    const r = await capture(BACKEND(standin.url), ['claude', '-p', 'Say hello']);
    assert.equal(r.exitCode, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /Hello from the stand-in\./);
    assert.equal(r.session.harness, 'claude');
    assert.ok(r.calls.length >= 1);
    assert.ok(r.calls.filter((c) => c.api === 'anthropic-messages').every((c) => c.stream));
    assertTokensMatch(r.calls, standin, from);
  });

  test('tool call round trip through Bash', async () => {
    const from = standin.calls.length;
    const r = await capture(BACKEND(standin.url), [
      'claude',
      '-p',
      'ECHO polarbear',
      '--dangerously-skip-permissions',
    ]);
    assert.equal(r.exitCode, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /Done\. Output: polarbear/);
    assertToolRoundTrip(r.calls, 'polarbear');
    assertTokensMatch(r.calls, standin, from);
  });
});
