/**
 * Publishing to SGLang without a restart (src/loop/publish.ts) against the SGLang stand-in's
 * /update_weights_from_disk (test/support/sglang-standin.ts, transcribed from sgl-project/sglang
 * http_server.py at commit 0025436e): each step's checkpoint is loaded in place with the step as the
 * server's weight version; the server goes on answering chat calls; a checkpoint the server cannot load
 * is a PublishError carrying the server's message and the fix, and the weights served stay the old ones.
 */
import assert from 'node:assert/strict';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Backend } from '../../../src/backends/types.ts';
import { PublishError, publisherFor } from '../../../src/loop/publish.ts';
import { type SglangChatStandin, startSglangChatStandin } from '../../support/sglang-standin.ts';
import { tempDir } from '../../support/temp.ts';

const tmp = tempDir('polar-publish-sglang-');
let server: SglangChatStandin;

before(async () => {
  server = await startSglangChatStandin();
});
after(async () => {
  await server?.close();
  rmSync(tmp, { recursive: true, force: true });
});

const sglang = (url: string) => ({ kind: 'sglang', url }) as unknown as Backend;

describe('SGLang: weights published from disk without a restart', () => {
  test('each step loads in place with its version; chat calls go on', async () => {
    const publisher = publisherFor(sglang(server.url), {
      backendOptions: { kind: 'sglang', url: server.url, model: 'Qwen/Qwen3-4B' },
    });
    assert.equal(publisher.needsOnnx, false);
    assert.equal(server.state.weightVersion, 'default', "SGLang's version before any update");
    for (const n of [1, 2]) {
      const checkpoint = join(tmp, `step-${n}`, 'train', 'step-1');
      mkdirSync(checkpoint, { recursive: true });
      await publisher.publish({ checkpoint, version: n });
      assert.equal(server.state.modelPath, checkpoint);
      assert.equal(server.state.weightVersion, String(n));
    }
    assert.deepEqual(
      server.updates.map((u) => u.weight_version),
      ['1', '2'],
      'the version is sent as SGLang takes it (a string)',
    );
    // the same server answers a chat call after the updates (nothing restarted)
    const r = await fetch(`${server.url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'Qwen/Qwen3-4B',
        messages: [{ role: 'user', content: 'hi' }],
        return_prompt_token_ids: true,
        return_meta_info: true,
        logprobs: true,
      }),
    });
    assert.equal(r.status, 200);
  });

  test('the restart-free publish of the strict loop (no version) sends the path alone', async () => {
    const checkpoint = join(tmp, 'plain');
    mkdirSync(checkpoint, { recursive: true });
    const before = server.state.weightVersion;
    await publisherFor(sglang(server.url), {
      backendOptions: { kind: 'sglang', url: server.url, model: 'm' },
    }).publish({ checkpoint });
    assert.deepEqual(server.updates.at(-1), { model_path: checkpoint, weight_version: null });
    assert.equal(server.state.weightVersion, before, 'no version given: the server keeps its own');
  });

  test('a checkpoint the server cannot load: a PublishError with its message, old weights kept', async () => {
    const served = server.state.modelPath;
    const missing = join(tmp, 'never-written');
    await assert.rejects(
      publisherFor(sglang(server.url), {
        backendOptions: { kind: 'sglang', url: server.url, model: 'm' },
      }).publish({ checkpoint: missing, version: 9 }),
      (error: unknown) => {
        assert.ok(error instanceof PublishError);
        assert.match(error.message, /SGLang refused the weight update \(400\)/);
        assert.match(error.message, /"success":false/);
        assert.match(error.message, /never-written is not a model directory/);
        assert.match(error.hint ?? '', /can read the checkpoint directory, or give --reload-cmd/);
        return true;
      },
    );
    assert.equal(server.state.modelPath, served);
    assert.notEqual(server.state.weightVersion, '9');
  });
});
