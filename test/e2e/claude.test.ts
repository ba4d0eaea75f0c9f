/** Real Claude Code (from npm) under `polar capture` with no provider flags of its own. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertTokensMatch, assertToolRoundTrip, vllmSuite } from './harness-suite.ts';

describe('claude', () => {
  const suite = vllmSuite();

  test('plain answer', async () => {
    const from = suite.standin.calls.length;
    const r = await suite.capture(['claude', '-p', 'Say hello']);
    assert.equal(r.exitCode, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /Hello from the stand-in\./);
    assert.equal(r.session.harness, 'claude');
    assert.ok(r.calls.length >= 1);
    assert.ok(r.calls.filter((c) => c.api === 'anthropic-messages').every((c) => c.stream));
    assertTokensMatch(r.calls, suite.standin, from);
  });

  test('tool call round trip through Bash', async () => {
    const from = suite.standin.calls.length;
    const r = await suite.capture(['claude', '-p', 'ECHO polarbear', '--dangerously-skip-permissions']);
    assert.equal(r.exitCode, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /Done\. Output: polarbear/);
    assertToolRoundTrip(r.calls, 'polarbear');
    assertTokensMatch(r.calls, suite.standin, from);
  });
});
