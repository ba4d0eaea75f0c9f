/** A harness agent with several inference servers: each sample talks to one, the least loaded at its start. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Backend } from '../../../src/backends/types.ts';
import { HarnessAgent, type RunCapture } from '../../../src/rollout/agents.ts';
import type { SweInstance } from '../../../src/rollout/dataset.ts';
import {
  type HarnessLaunchRequest,
  hostLaunch,
  type InstanceEnv,
} from '../../../src/rollout/runtime/types.ts';

test('samples spread over --backend-url A,B: one server per sample, least loaded first, each backend made once', async () => {
  const made: string[] = [];
  const seen: string[] = [];
  const gates: Array<() => void> = [];
  const fake: RunCapture = async (o) => {
    seen.push(String(o.backend.url));
    assert.equal((o.backendInstance as unknown as { url: string }).url, o.backend.url);
    await new Promise<void>((resolve) => gates.push(resolve));
    return {
      sessionId: 's',
      exitCode: 0,
      signal: null,
      status: 'completed',
      calls: 1,
      errors: 0,
      clientClosed: 0,
      cut: 0,
      lost: 0,
      output: o.output,
    };
  };
  const agent = new HarnessAgent({
    harness: 'generic',
    backend: { kind: 'vllm', model: 'm', url: 'http://a/v1' },
    backendUrls: ['http://a/v1', 'http://b/v1'],
    model: 'm',
    placement: 'host',
    genericCommand: ['true'],
    runCapture: fake,
    createBackend: async (options) => {
      made.push(String(options.url));
      return { url: options.url, close: async () => {} } as unknown as Backend;
    },
  });
  const env = {
    workdir: '/w',
    launchHarness: async (request: HarnessLaunchRequest) => hostLaunch(request, '/w'),
  } as unknown as InstanceEnv;
  const instance = { instance_id: 'i', repo: 'r', problem_statement: 'p' } as SweInstance;
  const run = (sample: number) =>
    agent.run({ instance, sample, env, timeoutMs: 1000, capturePath: `/tmp/c${sample}.jsonl`, meta: {} });
  const first = [run(0), run(1), run(2)];
  while (seen.length < 3) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(seen, ['http://a/v1', 'http://b/v1', 'http://a/v1']);
  gates[1]!(); // b's sample ends: b is the least loaded now
  await first[1];
  const fourth = run(3);
  while (seen.length < 4) await new Promise((r) => setTimeout(r, 5));
  assert.equal(seen[3], 'http://b/v1');
  for (const g of gates) g();
  await Promise.all([...first, fourth]);
  assert.deepEqual(made.sort(), ['http://a/v1', 'http://b/v1']);
  await agent.close();
});
