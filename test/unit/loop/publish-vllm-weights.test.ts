/**
 * Full weights to a running vLLM without a restart (issue 48), against the vLLM stand-in's weight-transfer
 * control plane (test/support/vllm-weight-transfer.ts, transcribed from vllm entrypoints/serve/dev/rlhf/
 * api_router.py and the disk engine) with calls going through polar's proxy as a harness's do: the publish
 * follows vLLM's order (pause, start, update, finish with the version, resume) and the server keeps running;
 * the next calls' records name the new version (and the stand-in agrees on which weights sampled them);
 * a call in flight finishes on the old weights first (wait), goes on with the new ones and names both
 * (keep), or is cut and sent again so the harness still gets its answer (abort); a server without the API
 * is refused before any rollout with the flags it needs and the versions that lack it.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { PolarError } from '../../../src/errors.ts';
import { type Publisher, publisherFor } from '../../../src/loop/publish.ts';
import type { PauseMode } from '../../../src/options/defaults.ts';
import {
  chatThrough,
  recordOf as recordIn,
  startProxy,
  type TestProxy,
} from '../../support/proxy-harness.ts';
import { tempDir } from '../../support/temp.ts';
import { type Standin, type StandinOptions, startStandin } from '../../support/vllm-standin.ts';
import type { WeightTransferOptions } from '../../support/vllm-weight-transfer.ts';

const MODEL = 'Qwen/Qwen3-4B';
const tmp = tempDir('polar-vllm-weights-');
after(() => rmSync(tmp, { recursive: true, force: true }));

/** A checkpoint as polar train writes one (the stand-in only looks for the *.safetensors file). */
function checkpoint(name: string, safetensors = true): string {
  const dir = join(tmp, name);
  mkdirSync(dir, { recursive: true });
  if (safetensors) writeFileSync(join(dir, 'model.safetensors'), 'weights');
  return dir;
}

interface Setup {
  standin: Standin;
  proxy: TestProxy;
  publisher: Publisher;
  close(): Promise<void>;
}

async function setup(
  weightTransfer: WeightTransferOptions | null,
  pause?: PauseMode,
  extra: StandinOptions = {},
): Promise<Setup> {
  const standin = await startStandin({
    model: MODEL,
    ...(weightTransfer ? { devMode: true, weightTransfer } : {}),
    ...extra,
  });
  const proxy = await startProxy({ url: standin.url, timeoutMs: 60_000 });
  const publisher = publisherFor(proxy.session.backend, {
    backendOptions: { kind: 'vllm', url: standin.url, model: MODEL },
    ...(pause ? { pause } : {}),
  });
  return {
    standin,
    proxy,
    publisher,
    async close() {
      await publisher.close?.();
      await proxy.close();
      await standin.close();
    },
  };
}

const DISK: WeightTransferOptions = { backend: 'disk' };

const call = (s: Setup, stream = false, text = 'hello') => chatThrough(s.proxy, text, stream);
const recordOf = (s: Setup, text: string) => recordIn(s.proxy, text);

/** Resolves once the stand-in has the request whose last message holds `text` (it is in flight). */
async function inFlight(s: Setup, text: string): Promise<void> {
  while (!s.standin.calls.some((c) => JSON.stringify(c.body.messages).includes(text)))
    await new Promise((r) => setTimeout(r, 5));
}

const truth = (s: Setup, text: string) =>
  s.standin.calls.filter((c) => JSON.stringify(c.body.messages).includes(text));

describe('vLLM disk weight transfer, driven by the publisher', () => {
  test("the publish loads the checkpoint in place in vLLM's order; the next calls name the new version", async () => {
    const s = await setup(DISK);
    try {
      await s.publisher.prepare!(0);
      const posts = () => s.standin.engine!.log.filter((l) => l.startsWith('POST'));
      assert.deepEqual(posts(), ['POST /init_weight_transfer_engine', 'POST /update_weight_version']);
      assert.equal(s.standin.engine!.label, '0');
      assert.equal((await call(s, false, 'before')).status, 200);
      const before = await recordOf(s, 'before');
      assert.deepEqual(before.weight_versions, { source: 'polar', versions: ['0'] });
      assert.equal(before.policy_version, 0);
      assert.deepEqual(truth(s, 'before')[0]!.weightVersions, ['0']);

      const one = checkpoint('step-1');
      const served = s.standin.engine!;
      await s.publisher.publish({ checkpoint: one, version: 1 });
      assert.deepEqual(posts().slice(2), [
        'POST /pause?mode=wait&wait_for_inflight_requests=true',
        'POST /start_weight_update',
        'POST /update_weights',
        'POST /finish_weight_update',
        'POST /resume',
      ]);
      assert.equal(served.weights, one, 'the same server now serves the checkpoint');
      assert.equal(served.label, '1');
      assert.equal(served.paused, false);

      assert.equal((await call(s, true, 'after')).status, 200);
      const later = await recordOf(s, 'after');
      assert.deepEqual(later.weight_versions, { source: 'polar', versions: ['1'] });
      assert.equal(later.policy_version, 1);
      assert.deepEqual(truth(s, 'after')[0]!.weightVersions, ['1']);
      assert.equal(truth(s, 'after')[0]!.weights, one);
    } finally {
      await s.close();
    }
  });

  test('wait: a call in flight finishes on the old weights; the update waits for it', async () => {
    const s = await setup(DISK, 'wait');
    try {
      await s.publisher.prepare!(0);
      s.standin.faults.push({ chunkDelayMs: 40 });
      let answered = 0;
      const slow = call(s, true, 'slow wait').then((r) => {
        answered = performance.now();
        return r;
      });
      await inFlight(s, 'slow wait');
      await s.publisher.publish({ checkpoint: checkpoint('wait-1'), version: 1 });
      const published = performance.now();
      const r = await slow;
      assert.equal(r.status, 200);
      assert.ok(answered > 0 && answered <= published, 'the call was over before the publish returned');
      assert.deepEqual((await recordOf(s, 'slow wait')).weight_versions, {
        source: 'polar',
        versions: ['0'],
      });
      assert.deepEqual(truth(s, 'slow wait')[0]!.weightVersions, ['0']);
    } finally {
      await s.close();
    }
  });

  test('keep: a call in flight is frozen, goes on with the new weights, and names both versions', async () => {
    const s = await setup(DISK, 'keep');
    try {
      await s.publisher.prepare!(0);
      s.standin.faults.push({ chunkDelayMs: 40 });
      const slow = call(s, true, 'slow keep');
      await inFlight(s, 'slow keep');
      await s.publisher.publish({ checkpoint: checkpoint('keep-1'), version: 1 });
      assert.equal((await slow).status, 200);
      assert.deepEqual(
        truth(s, 'slow keep')[0]!.weightVersions,
        ['0', '1'],
        'the stand-in sampled with both',
      );
      const record = await recordOf(s, 'slow keep');
      assert.deepEqual(record.weight_versions, { source: 'polar', versions: ['0', '1'] });
      assert.equal(record.policy_version, 0, 'the oldest counts for staleness');
    } finally {
      await s.close();
    }
  });

  test('abort: a call not yet answered is cut and sent again; the harness gets the new weights’ answer', async () => {
    const s = await setup(DISK, 'abort');
    try {
      await s.publisher.prepare!(0);
      s.standin.faults.push({ chunkDelayMs: 40 });
      const slow = call(s, false, 'slow abort');
      await inFlight(s, 'slow abort');
      await s.publisher.publish({ checkpoint: checkpoint('abort-1'), version: 1 });
      const r = await slow;
      assert.equal(r.status, 200, r.body);
      assert.match(r.body, /Hello from the stand-in/);
      const attempts = truth(s, 'slow abort');
      assert.deepEqual(
        attempts.map((c) => c.weightVersions),
        [['0'], ['1']],
        'cut under version 0, answered again by version 1',
      );
      const record = await recordOf(s, 'slow abort');
      assert.equal(record.error, null);
      assert.equal(record.backend_info?.weight_update_retries, 1);
      assert.equal(record.backend_info?.weight_update_cut, undefined);
      assert.equal(
        s.proxy.counters.weightUpdateCut,
        0,
        'sent again before anything reached the harness: not cut',
      );
      assert.deepEqual(record.weight_versions, { source: 'polar', versions: ['1'] });
      assert.equal(record.policy_version, 1);
    } finally {
      await s.close();
    }
  });

  test('abort: a call already streaming to the harness ends with the server’s abort, for the harness to retry', async () => {
    const s = await setup(DISK, 'abort');
    try {
      await s.publisher.prepare!(0);
      s.standin.faults.push({ chunkDelayMs: 60 });
      const slow = call(s, true, 'streaming abort');
      await inFlight(s, 'streaming abort');
      // (the proxy answers once the first output is in: then the cut reaches a harness already reading)
      await new Promise((r) => setTimeout(r, 300));
      await s.publisher.publish({ checkpoint: checkpoint('abort-2'), version: 1 });
      const r = await slow;
      assert.equal(r.status, 200);
      assert.match(r.body, /aborted the generation/);
      const record = await recordOf(s, 'streaming abort');
      assert.equal(record.error?.kind, 'backend_error');
      assert.equal(record.backend_info?.weight_update_retries, undefined);
      assert.equal(record.backend_info?.weight_update_cut, true, 'marked: cut by the update, not the agent');
      // counted apart, so the sample's outcome is an infrastructure failure (src/rollout/outcome.ts)
      assert.equal(s.proxy.counters.weightUpdateCut, 1);
      assert.equal(
        truth(s, 'streaming abort').length,
        1,
        'not sent again: part of it had reached the harness',
      );
    } finally {
      await s.close();
    }
  });
});

describe('a backend polar reloads itself (no weight updates on a server)', () => {
  test('each call names the version set on the backend when it started', async () => {
    const s = await setup(null);
    try {
      s.proxy.session.backend.policyVersion = 4;
      assert.equal((await call(s, false, 'in process')).status, 200);
      const r = await recordOf(s, 'in process');
      assert.deepEqual(r.weight_versions, { source: 'polar', versions: ['4'] });
      assert.equal(r.policy_version, 4);
    } finally {
      await s.close();
    }
  });
});

describe('several vLLM servers (--backend-url A,B)', () => {
  test('each publish goes to every server, each labelled with the version', async () => {
    const a = await startStandin({ model: MODEL, devMode: true, weightTransfer: DISK });
    const b = await startStandin({ model: MODEL, devMode: true, weightTransfer: DISK });
    const backend = { kind: 'vllm', url: a.url } as never;
    const publisher = publisherFor(backend, {
      backendOptions: { kind: 'vllm', url: a.url, model: MODEL },
      servers: [a.url, b.url],
    });
    try {
      await publisher.prepare!(0);
      const one = checkpoint('both-1');
      await publisher.publish({ checkpoint: one, version: 1 });
      for (const s of [a, b]) {
        assert.equal(s.engine!.weights, one);
        assert.equal(s.engine!.label, '1');
        assert.equal(s.engine!.paused, false);
      }
      assert.equal((backend as { policyVersion?: number }).policyVersion, 1);
    } finally {
      await publisher.close?.();
      await a.close();
      await b.close();
    }
  });

  test('one without the API and --reload-cmd: the run restarts them (the command once per publish)', async () => {
    const a = await startStandin({ model: MODEL, devMode: true, weightTransfer: DISK });
    const b = await startStandin({ model: MODEL });
    const marks = join(tmp, 'restarts');
    const publisher = publisherFor({ kind: 'vllm', url: a.url } as never, {
      backendOptions: { kind: 'vllm', url: a.url, model: MODEL },
      servers: [a.url, b.url],
      reloadCmd: `echo restart >> ${marks}`,
      readyTimeoutMs: 30_000,
    });
    try {
      await publisher.prepare!(0);
      await publisher.publish({ checkpoint: checkpoint('restart-1'), version: 1 });
      assert.equal(readFileSync(marks, 'utf8'), 'restart\n');
      assert.equal(a.engine!.weights, MODEL, 'not updated in place: the restart serves it');
    } finally {
      await publisher.close?.();
      await a.close();
      await b.close();
    }
  });
});

describe('a vLLM that cannot take weights in place', () => {
  const refused = async (s: Setup, message: RegExp, hint: RegExp) => {
    try {
      await assert.rejects(s.publisher.prepare!(0), (e: unknown) => {
        assert.ok(PolarError.isInstance(e));
        assert.equal(e.exitCode, 4, 'a set-up of the environment, as the server check says one');
        assert.match(e.message, message);
        assert.match(String(e.hint), hint);
        return true;
      });
    } finally {
      await s.close();
    }
  };

  test('started without VLLM_SERVER_DEV_MODE: the flags it needs and the versions that lack the API', async () =>
    refused(
      await setup(null),
      /vLLM at http:\/\/127\.0\.0\.1:\d+ \(0\.32\.0\) offers no weight-transfer API/,
      /VLLM_SERVER_DEV_MODE=1 .*--weight-transfer-config '\{"backend": "nccl"\}'.*0\.15 and older.*--reload-cmd/,
    ));

  test('dev mode without --weight-transfer-config', async () =>
    refused(
      await setup({ backend: null }),
      /started without --weight-transfer-config/,
      /--weight-transfer-config/,
    ));

  test('the ipc backend, which polar does not drive', async () =>
    refused(await setup({ backend: 'ipc' }), /the ipc backend, which polar does not drive/, /--reload-cmd/));

  test('--weight-sync-pause keep against a /pause without modes (an older vLLM)', async () =>
    refused(
      await setup({ backend: 'disk', pauseModes: false }, 'keep'),
      /--weight-sync-pause keep, but the \/pause .* has no mode/,
      /wait or abort/,
    ));

  test('--weight-sync disk against a server started with nccl', async () => {
    const standin = await startStandin({ model: MODEL, devMode: true, weightTransfer: { backend: 'nccl' } });
    const publisher = publisherFor({ kind: 'vllm', url: standin.url } as never, {
      backendOptions: { kind: 'vllm', url: standin.url, model: MODEL },
      weightSync: 'disk',
    });
    try {
      await assert.rejects(
        publisher.prepare!(0),
        /--weight-sync disk, but vLLM .* was started with the nccl backend/,
      );
    } finally {
      await standin.close();
    }
  });

  test('a checkpoint without safetensors: vLLM’s message, nothing loaded, the server resumed on the old weights', async () => {
    const s = await setup(DISK);
    try {
      await s.publisher.prepare!(0);
      const empty = checkpoint('no-weights', false);
      await assert.rejects(s.publisher.publish({ checkpoint: empty, version: 1 }), (e: unknown) => {
        assert.ok(PolarError.isInstance(e));
        assert.match(
          e.message,
          /vLLM refused to load .* \(400: Shared-disk checkpoint directory contains no safetensors files/,
        );
        return true;
      });
      assert.equal(s.standin.engine!.paused, false, 'resumed: nothing was loaded');
      assert.equal(s.standin.engine!.weights, MODEL);
      assert.equal(s.standin.engine!.label, '0');
      assert.equal((await call(s, false, 'still served')).status, 200);
    } finally {
      await s.close();
    }
  });
});
