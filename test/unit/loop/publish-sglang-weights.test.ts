/**
 * Weights to a running SGLang without a restart, and the versions SGLang reports (issue 48), against the
 * SGLang stand-in (test/support/sglang-weights.ts, transcribed from SGLang's http_server.py, io_struct.py,
 * serving_chat.py and utils/weight_versions.py) with calls going through polar's proxy: the loop labels the
 * served weights, each record names the version SGLang says sampled it (source server, with its spans);
 * an update waits for the calls in flight (wait), retracts them so they are recomputed with the new weights
 * (keep), or aborts them and polar sends them again (abort); the version route is told not to abort.
 */
import assert from 'node:assert/strict';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type Publisher, publisherFor } from '../../../src/loop/publish.ts';
import type { PauseMode } from '../../../src/options/defaults.ts';
import {
  chatThrough,
  recordOf as recordIn,
  startProxy,
  type TestProxy,
} from '../../support/proxy-harness.ts';
import { type SglangChatStandin, startSglangChatStandin } from '../../support/sglang-standin.ts';
import { tempDir } from '../../support/temp.ts';

const MODEL = 'Qwen/Qwen3-4B';
const tmp = tempDir('polar-sglang-weights-');
after(() => rmSync(tmp, { recursive: true, force: true }));

function checkpoint(name: string): string {
  const dir = join(tmp, name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

interface Setup {
  server: SglangChatStandin;
  proxy: TestProxy;
  publisher: Publisher;
  close(): Promise<void>;
}

async function setup(
  pause?: PauseMode,
  options: { delayMs?: number; noSpans?: boolean; noPauseModes?: boolean } = {},
): Promise<Setup> {
  const server = await startSglangChatStandin({
    ...(options.delayMs ? { delayMs: options.delayMs } : {}),
    weights: {
      ...(options.noSpans ? { noSpans: true } : {}),
      ...(options.noPauseModes ? { noPauseModes: true } : {}),
    },
  });
  const proxy = await startProxy({ kind: 'sglang', url: server.url, timeoutMs: 60_000 });
  const publisher = publisherFor(proxy.session.backend, {
    backendOptions: { kind: 'sglang', url: server.url, model: MODEL },
    ...(pause ? { pause } : {}),
  });
  return {
    server,
    proxy,
    publisher,
    async close() {
      await proxy.close();
      await server.close();
    },
  };
}

const call = async (s: Setup, text: string) => (await chatThrough(s.proxy, text)).status;
const recordOf = (s: Setup, text: string) => recordIn(s.proxy, text);

async function inFlight(s: Setup): Promise<void> {
  while (s.server.engine.inflight.size === 0) await new Promise((r) => setTimeout(r, 5));
}

describe('SGLang: the versions it reports, and updates against calls in flight', () => {
  test('the loop labels the weights; each record names the version SGLang reports, with its span', async () => {
    const s = await setup();
    try {
      await s.publisher.prepare!(0);
      const set = s.server.engine.log.find((e) => e.path === '/update_weight_version');
      assert.deepEqual(set?.body, { new_version: '0', abort_all_requests: false }, 'told not to abort');
      assert.equal(await call(s, 'first'), 200);
      const r = await recordOf(s, 'first');
      assert.equal(r.weight_versions?.source, 'server');
      assert.deepEqual(r.weight_versions?.versions, ['0']);
      assert.deepEqual(r.weight_versions?.spans, [
        { version: '0', start: 0, end: r.completion_token_ids!.length },
      ]);
      assert.equal(r.policy_version, 0);

      await s.publisher.publish({ checkpoint: checkpoint('s1'), version: 1 });
      assert.equal(await call(s, 'second'), 200);
      const r2 = await recordOf(s, 'second');
      assert.deepEqual(r2.weight_versions?.versions, ['1']);
      assert.equal(r2.policy_version, 1);
    } finally {
      await s.close();
    }
  });

  test('an older SGLang reports the single weight_version: recorded without spans', async () => {
    const s = await setup(undefined, { noSpans: true });
    try {
      await s.publisher.prepare!(0);
      assert.equal(await call(s, 'older'), 200);
      assert.deepEqual((await recordOf(s, 'older')).weight_versions, { source: 'server', versions: ['0'] });
    } finally {
      await s.close();
    }
  });

  test('wait: the update waits for the call in flight, which finishes on the old weights', async () => {
    const s = await setup('wait', { delayMs: 300 });
    try {
      await s.publisher.prepare!(0);
      const slow = call(s, 'slow wait');
      await inFlight(s);
      await s.publisher.publish({ checkpoint: checkpoint('w1'), version: 1 });
      assert.equal(await slow, 200);
      assert.deepEqual((await recordOf(s, 'slow wait')).weight_versions?.versions, ['0']);
      const update = s.server.engine.log.find((e) => e.path === '/update_weights_from_disk');
      assert.deepEqual(update?.body, { model_path: join(tmp, 'w1'), weight_version: '1' });
    } finally {
      await s.close();
    }
  });

  test('keep: the call in flight is retracted and recomputed with the new weights, as SGLang says', async () => {
    const s = await setup('keep', { delayMs: 300 });
    try {
      await s.publisher.prepare!(0);
      const slow = call(s, 'slow keep');
      await inFlight(s);
      await s.publisher.publish({ checkpoint: checkpoint('k1'), version: 1 });
      assert.equal(await slow, 200);
      const paths = s.server.engine.log.map((e) => e.path);
      assert.deepEqual(paths.slice(-3), [
        '/pause_generation',
        '/update_weights_from_disk',
        '/continue_generation',
      ]);
      assert.deepEqual(s.server.engine.log.at(-3)?.body, { mode: 'retract' });
      const r = await recordOf(s, 'slow keep');
      // polar's own view would be [0, 1]; the server's answer is what the record keeps
      assert.deepEqual(r.weight_versions?.versions, ['1']);
      assert.equal(r.policy_version, 1);
    } finally {
      await s.close();
    }
  });

  test('abort: the call in flight is aborted and sent again; the harness gets its answer', async () => {
    const s = await setup('abort', { delayMs: 300 });
    try {
      await s.publisher.prepare!(0);
      const slow = call(s, 'slow abort');
      await inFlight(s);
      await s.publisher.publish({ checkpoint: checkpoint('a1'), version: 1 });
      assert.equal(await slow, 200);
      const update = s.server.engine.log.find((e) => e.path === '/update_weights_from_disk');
      assert.equal(update?.body.abort_all_requests, true);
      const attempts = s.server.calls.filter((c) => JSON.stringify(c.body.messages).includes('slow abort'));
      assert.equal(attempts.length, 2, 'aborted once, answered the second time');
      const r = await recordOf(s, 'slow abort');
      assert.equal(r.error, null);
      assert.equal(r.backend_info?.weight_update_retries, 1);
      assert.deepEqual(r.weight_versions?.versions, ['1']);
    } finally {
      await s.close();
    }
  });

  test('keep against an older SGLang whose /pause_generation takes no mode: refused at the start', async () => {
    const s = await setup('keep', { noPauseModes: true });
    try {
      await assert.rejects(s.publisher.prepare!(0), (e: unknown) => {
        assert.ok(e instanceof Error);
        assert.match(
          e.message,
          /--weight-sync-pause keep, but the \/pause_generation of SGLang .* takes no mode/,
        );
        return true;
      });
    } finally {
      await s.close();
    }
  });
});
