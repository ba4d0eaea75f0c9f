/**
 * What the harness end-to-end files share: a vLLM stand-in for a describe block (vllmSuite: started
 * before its tests, closed after, `polar capture` against it) and the assertions on what was recorded.
 */
import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import type { CallRecord } from '../../src/capture/record.ts';
import { isTokenCount } from '../../src/protocols/canonical.ts';
import { type CaptureOutcome, capture } from '../support/capture-run.ts';
import { type Standin, type StandinOptions, startStandin } from '../support/vllm-standin.ts';

export interface VllmSuite {
  /** the running stand-in (inside the block's tests) */
  readonly standin: Standin;
  /** polar's flags for it: --backend vllm --backend-url URL --model MODEL, then `extra` */
  backend(extra?: string[]): string[];
  /** `polar capture [backend + extra] -- harness...` against it */
  capture(harness: string[], extra?: string[]): Promise<CaptureOutcome>;
}

/** The vLLM stand-in of the enclosing describe block (or file), serving `model`. */
export function vllmSuite(options: StandinOptions = {}, model = 'Qwen/Qwen3-4B'): VllmSuite {
  let running: Standin | undefined;
  before(async () => {
    running = await startStandin(options);
  });
  after(() => running?.close());
  const suite: VllmSuite = {
    get standin() {
      assert.ok(running, 'the stand-in runs inside the suite');
      return running;
    },
    backend: (extra = []) => [
      '--backend',
      'vllm',
      '--backend-url',
      suite.standin.url,
      '--model',
      model,
      ...extra,
    ],
    capture: (harness, extra = []) => capture(suite.backend(extra), harness),
  };
  return suite;
}

/** Every call's ids and logprobs are exactly what the stand-in sampled for that request. */
export function assertTokensMatch(calls: CallRecord[], standin: Standin, from = 0): void {
  const modelCalls = calls.filter((c) => !isTokenCount(c.api) && c.error === null);
  assert.equal(modelCalls.length, standin.calls.length - from, 'one call record per backend call');
  modelCalls.forEach((call, i) => {
    const served = standin.calls[from + i]!;
    assert.equal(call.token_exact, true, `call ${i} token_exact`);
    assert.deepEqual(call.prompt_token_ids, served.promptIds, `call ${i} prompt ids`);
    assert.deepEqual(call.completion_token_ids, served.completionIds, `call ${i} completion ids`);
    assert.deepEqual(call.completion_logprobs, served.logprobs, `call ${i} logprobs`);
    assert.equal(call.completion_logprobs?.length, call.completion_token_ids?.length);
  });
}

/** The request after the tool call carries the tool's real output back. */
export function assertToolRoundTrip(calls: CallRecord[], word: string): void {
  const modelCalls = calls.filter((c) => !isTokenCount(c.api) && c.error === null);
  const first = modelCalls.findIndex((c) => c.finish_reason === 'tool_calls');
  assert.ok(first >= 0, 'a call ended in a tool call');
  const next = modelCalls[first + 1];
  assert.ok(next, 'the harness called again after running the tool');
  const canonical = next.canonical_request as { messages: Array<{ role: string; content: unknown }> };
  const toolMsg = canonical.messages.find((m) => m.role === 'tool');
  assert.ok(toolMsg, 'the next request has a tool result');
  assert.match(JSON.stringify(toolMsg.content), new RegExp(word), 'the tool result holds the echo output');
}
