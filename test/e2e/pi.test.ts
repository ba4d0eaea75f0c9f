/** Real Pi (from npm) under `polar capture`, over each of its three wire APIs, against the vLLM stand-in. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { capture } from '../support/capture-run.ts';
import { type Standin, startStandin } from '../support/vllm-standin.ts';
import { assertTokensMatch, assertToolRoundTrip } from './harness-assert.ts';

const MODEL = 'Qwen/Qwen3-4B';

for (const api of ['openai-completions', 'openai-responses', 'anthropic-messages'] as const) {
  describe(`pi over ${api}`, () => {
    let standin: Standin;
    before(async () => {
      standin = await startStandin();
    });
    after(() => standin.close());

    test('plain answer', async () => {
      const r = await capture(
        ['--backend', 'vllm', '--backend-url', standin.url, '--model', MODEL, '--pi-api', api],
        ['pi', '-p', 'Say hello'],
      );
      assert.equal(r.exitCode, 0, r.stderr);
      assert.match(r.stdout, /Hello from the stand-in\./);
      assert.equal(r.session.harness, 'pi');
      assert.equal(r.end?.status, 'completed');
      assert.equal(r.end?.exit_code, 0);
      assertTokensMatch(r.calls, standin);
      const expected = api === 'openai-completions' ? 'openai-chat' : api;
      assert.ok(r.calls.every((c) => c.api === expected));
    });

    test('tool call round trip', async () => {
      const from = standin.calls.length;
      const r = await capture(
        ['--backend', 'vllm', '--backend-url', standin.url, '--model', MODEL, '--pi-api', api],
        ['pi', '-p', 'ECHO polarbear'],
      );
      assert.equal(r.exitCode, 0, r.stderr);
      assert.match(r.stdout, /Done\. Output: polarbear/);
      assertToolRoundTrip(r.calls, 'polarbear');
      assertTokensMatch(r.calls, standin, from);
      assert.ok(
        r.calls.every((c) => c.stream),
        'pi always streams',
      );
    });
  });
}
