/** polar gym's expected failures are PolarErrors (the CLI names the flag), not "internal error, please report". */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PolarError } from '../../../src/errors.ts';
import { type GymOptions, startGym } from '../../../src/gym/server.ts';
import type { Runtime } from '../../../src/rollout/runtime/types.ts';

const base = {
  harness: 'generic',
  backend: { kind: 'vllm', model: 'm', url: 'http://127.0.0.1:9/v1' },
  runtime: { kind: 'local', isolated: false } as unknown as Runtime,
  placement: 'host',
  out: '/nonexistent/never-created',
  port: 0,
} as GymOptions;

for (const [field, flag] of [
  ['maxRollouts', '--max-rollouts'],
  ['maxInflight', '--max-inflight'],
] as const) {
  test(`${flag} 0 is a usage error naming the flag`, async () => {
    await assert.rejects(startGym({ ...base, [field]: 0 }), (error: unknown) => {
      assert.ok(PolarError.isInstance(error), 'a PolarError');
      assert.match((error as Error).message, new RegExp(`${flag} must be`));
      return true;
    });
  });
}
