/** `polar eval --pass-env NAME`: the name reaches runCapture's allow-list and the container's `-e` list. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CaptureRunOptions } from '../../../src/capture/run.ts';
import { HarnessAgent } from '../../../src/rollout/agents.ts';
import type { SweInstance } from '../../../src/rollout/dataset.ts';
import type { HarnessLaunchRequest, InstanceEnv } from '../../../src/rollout/runtime/types.ts';

test('eval hands --pass-env names to the container command and to runCapture', async () => {
  let passed: string[] = [];
  let captureOptions: CaptureRunOptions | undefined;
  const env = {
    workdir: '/testbed',
    scratch: '/tmp',
    launchHarness: async (request: HarnessLaunchRequest) => {
      passed = request.passEnv;
      return {
        command: ['docker', 'exec', ...request.passEnv.flatMap((n) => ['-e', n]), 'ctr', ...request.argv],
        cwd: '/',
        env: request.env,
        close: async () => {},
      };
    },
  } as unknown as InstanceEnv;
  const agent = new HarnessAgent({
    harness: 'codex',
    backend: { kind: 'vllm', model: 'm', url: 'http://127.0.0.1:1/v1' },
    model: 'm',
    placement: 'container',
    passEnv: ['GOPATH'],
    backendInstance: {} as never,
    runCapture: async (options) => {
      captureOptions = options;
      await options.launch?.({
        argv: options.command,
        env: {},
        proxyUrl: 'http://127.0.0.1:1',
        runDir: '/r',
      });
      return {
        sessionId: 's',
        exitCode: 0,
        signal: null,
        status: 'completed',
        calls: 0,
        errors: 0,
        clientClosed: 0,
        cut: 0,
        lost: 0,
        output: 'o',
      };
    },
  });
  const instance = {
    instance_id: 'a__b-1',
    repo: 'a/b',
    problem_statement: 'fix',
    hints_text: '',
  } as SweInstance;
  const outcome = await agent.run({
    instance,
    sample: 0,
    env,
    timeoutMs: 1000,
    capturePath: '/tmp/c.jsonl',
    meta: {},
  });
  assert.equal(outcome.status, 'completed', outcome.error ?? '');
  assert.ok(passed.includes('GOPATH') && passed.includes('CODEX_HOME') && passed.includes('POLAR_PROMPT'));
  assert.deepEqual(captureOptions?.passEnv, ['GOPATH']);
  assert.ok(!passed.some((n) => n.includes('=')), 'names only');
});
