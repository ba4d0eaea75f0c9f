/**
 * src/gym/backends.ts on its own: which server a rollout gets (fewest rollouts running, ties in turn)
 * and what the row's sampling does to a harness's request (temperature and top_p replaced, max tokens
 * capped), with the facts each call records.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BackendPool } from '../../../src/backends/pool.ts';
import type { Backend, CallContext } from '../../../src/backends/types.ts';
import { withRowSampling } from '../../../src/gym/backends.ts';
import type { CanonicalRequest, StreamEvent } from '../../../src/protocols/canonical.ts';

function fake(url: string, seen: CanonicalRequest[] = []): Backend {
  return {
    kind: 'fake',
    tokenExact: true,
    url,
    async *generate(request: CanonicalRequest): AsyncGenerator<StreamEvent> {
      seen.push(request);
      yield { type: 'error', error: { kind: 'backend_error', message: 'fake' } } as StreamEvent;
    },
    countTokens: async () => ({ tokens: 1, exact: true }),
    close: async () => {},
  };
}

describe('BackendPool', () => {
  test('a new rollout goes to the server with the fewest rollouts running, ties in turn', () => {
    const pool = new BackendPool([fake('a'), fake('b'), fake('c')]);
    const first = pool.acquire();
    const second = pool.acquire();
    const third = pool.acquire();
    assert.deepEqual([first.index, second.index, third.index], [0, 1, 2]);
    second.release();
    assert.equal(pool.acquire().index, 1, 'the idle server, not the next in turn');
    second.release(); // a second release changes nothing
    assert.deepEqual(
      pool.load.map((l) => l.rollouts),
      [1, 1, 1],
    );
    first.release();
    third.release();
    // all idle but b: a, then c (in turn after b), then a again
    assert.deepEqual([pool.acquire().index, pool.acquire().index], [2, 0]);
  });
});

describe("withRowSampling: the row's parameters win", () => {
  const annotations: Record<string, unknown> = {};
  const context = {
    recorder: {
      annotate: (k: string, v: unknown) => {
        annotations[k] = v;
      },
    },
  } as unknown as CallContext;
  const request = (extra: Partial<CanonicalRequest>): CanonicalRequest => ({
    model: 'm',
    messages: [],
    tools: [],
    stream: true,
    ...extra,
  });

  test('temperature and top_p replaced, max_output_tokens caps the harness ask', async () => {
    const seen: CanonicalRequest[] = [];
    const b = withRowSampling(fake('a', seen), { temperature: 0.7, topP: 0.95, maxOutputTokens: 2048 });
    for (const r of [
      request({ temperature: 1, topP: 1, maxTokens: 32000 }),
      request({ maxTokens: 100 }),
      request({}),
    ]) {
      for await (const _ of b.generate(r, context)) {
        // drain
      }
    }
    assert.deepEqual(
      seen.map((r) => [r.temperature, r.topP, r.maxTokens]),
      [
        [0.7, 0.95, 2048],
        [0.7, 0.95, 100],
        [0.7, 0.95, 2048],
      ],
    );
    assert.deepEqual(annotations.gym_sampling, {
      row: { temperature: 0.7, top_p: 0.95, max_output_tokens: 2048 },
      harness: { temperature: null, top_p: null, max_tokens: null },
      sent: { temperature: 0.7, top_p: 0.95, max_tokens: 2048 },
    });
  });

  test('a row without sampling fields leaves the harness its own', () => {
    const inner = fake('a');
    assert.equal(withRowSampling(inner, { temperature: null, topP: null, maxOutputTokens: null }), inner);
  });
});
