/** Real Pi (from npm) under `polar capture`, over each of its three wire APIs, against the vLLM stand-in. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertTokensMatch, assertToolRoundTrip, vllmSuite } from './harness-suite.ts';

const MODEL = 'Qwen/Qwen3-4B';

for (const api of ['openai-completions', 'openai-responses', 'anthropic-messages'] as const) {
  describe(`pi over ${api}`, () => {
    const suite = vllmSuite({}, MODEL);

    test('plain answer', async () => {
      const r = await suite.capture(['pi', '-p', 'Say hello'], ['--pi-api', api]);
      assert.equal(r.exitCode, 0, r.stderr);
      assert.match(r.stdout, /Hello from the stand-in\./);
      assert.equal(r.session.harness, 'pi');
      assert.equal(r.end?.status, 'completed');
      assert.equal(r.end?.exit_code, 0);
      assertTokensMatch(r.calls, suite.standin);
      const expected = api === 'openai-completions' ? 'openai-chat' : api;
      assert.ok(r.calls.every((c) => c.api === expected));
    });

    test('tool call round trip', async () => {
      const from = suite.standin.calls.length;
      const r = await suite.capture(['pi', '-p', 'ECHO polarbear'], ['--pi-api', api]);
      assert.equal(r.exitCode, 0, r.stderr);
      assert.match(r.stdout, /Done\. Output: polarbear/);
      assertToolRoundTrip(r.calls, 'polarbear');
      assertTokensMatch(r.calls, suite.standin, from);
      assert.ok(
        r.calls.every((c) => c.stream),
        'pi always streams',
      );
    });
  });
}
