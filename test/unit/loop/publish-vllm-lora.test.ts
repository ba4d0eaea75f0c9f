/**
 * Publishing a LoRA run to vLLM without a restart (issue 27 part 2): against the vLLM stand-in with its
 * runtime LoRA routes (test/support/vllm-standin.ts, transcribed from vllm serve/lora/api_router.py and
 * openai/serving_models.py), the publisher loads each step's adapter under a new name, new calls ask for
 * it, a call in flight during a publish finishes on the old adapter, the previous adapter is unloaded, a
 * re-publish after a resume loads again, and every failure is a PolarError with the fix.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createBackend } from '../../../src/backends/index.ts';
import type { Backend, CallContext } from '../../../src/backends/types.ts';
import { PolarError } from '../../../src/errors.ts';
import { PublishError, publisherFor } from '../../../src/loop/publish.ts';
import type { CanonicalRequest } from '../../../src/protocols/canonical.ts';
import { tempDir } from '../../support/temp.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

const MODEL = 'Qwen/Qwen3-4B';

/** A training checkpoint folder with a peft adapter in adapter/ (polar train --lora's layout). */
function checkpoint(name: string, adapter = true): string {
  const dir = join(tempDir('polar-lora-'), name);
  mkdirSync(join(dir, 'adapter'), { recursive: true });
  if (adapter) writeFileSync(join(dir, 'adapter', 'adapter_config.json'), '{"r": 8, "peft_type": "LORA"}');
  return dir;
}

const request: CanonicalRequest = {
  model: 'harness-name',
  messages: [{ role: 'user', content: [{ type: 'text', text: 'hello' }] }],
  tools: [],
  stream: true,
};

function context(): CallContext {
  return {
    sessionId: 's',
    callId: 'c',
    signal: new AbortController().signal,
    recorder: { backendRequest() {}, tokens() {}, warn() {}, annotate() {} },
    sessionState: new Map(),
  };
}

/** Runs one call to the end; its finish or error event. */
async function call(backend: Backend): Promise<{ type: string }> {
  let last: { type: string } = { type: 'none' };
  for await (const e of backend.generate(request, context())) last = e as { type: string };
  return last;
}

describe('vLLM: a LoRA run published at run time', () => {
  let standin: Standin;
  let backend: Backend;
  before(async () => {
    standin = await startStandin({ runtimeLora: true, model: MODEL });
    backend = await createBackend({ kind: 'vllm', url: standin.url, model: MODEL });
  });
  after(async () => {
    await backend.close();
    await standin.close();
  });

  test('each step loads a new adapter, new calls name it, the previous one is unloaded', async () => {
    const publisher = publisherFor(backend, {
      backendOptions: { kind: 'vllm', url: standin.url, model: MODEL },
      lora: true,
    });
    assert.equal(publisher.needsOnnx, false);
    assert.equal((await call(backend)).type, 'finish');
    assert.equal(standin.calls.at(-1)!.body.model, MODEL, 'before any publish: the base model');

    const one = checkpoint('step-1');
    await publisher.publish({ checkpoint: one, version: 1 });
    assert.deepEqual([...standin.adapters], [['polar-step-1', join(one, 'adapter')]]);
    assert.equal((await call(backend)).type, 'finish');
    assert.equal(standin.calls.at(-1)!.body.model, 'polar-step-1');

    await publisher.publish({ checkpoint: checkpoint('step-2'), version: 2 });
    assert.deepEqual([...standin.adapters.keys()], ['polar-step-2'], 'step 1 unloaded');
    assert.equal((await call(backend)).type, 'finish');
    assert.equal(standin.calls.at(-1)!.body.model, 'polar-step-2');
  });

  test('a call in flight during a publish finishes on the adapter it started with', async () => {
    const publisher = publisherFor(backend, {
      backendOptions: { kind: 'vllm', url: standin.url, model: MODEL },
      lora: true,
    });
    await publisher.publish({ checkpoint: checkpoint('step-3'), version: 3 });
    standin.faults.push({ chunkDelayMs: 30 }); // a slow stream
    const before = standin.calls.length;
    const slow = call(backend);
    // wait until the stand-in has the request (it records it before streaming)
    while (standin.calls.length === before) await new Promise((r) => setTimeout(r, 5));
    await publisher.publish({ checkpoint: checkpoint('step-4'), version: 4 });
    assert.ok(!standin.adapters.has('polar-step-3'), 'the old adapter is off the served list');
    assert.equal((await slow).type, 'finish', 'the call in flight finished');
    assert.equal(standin.calls[before]!.body.model, 'polar-step-3');
    assert.equal((await call(backend)).type, 'finish');
    assert.equal(standin.calls.at(-1)!.body.model, 'polar-step-4');
  });

  test('a resumed run publishes a step the server still holds: loaded afresh', async () => {
    const fresh = publisherFor(backend, {
      backendOptions: { kind: 'vllm', url: standin.url, model: MODEL },
      lora: true,
    });
    const again = checkpoint('step-4-again');
    await fresh.publish({ checkpoint: again, version: 4 });
    assert.equal(standin.adapters.get('polar-step-4'), join(again, 'adapter'));
  });

  test('a checkpoint without an adapter: a PublishError naming it', async () => {
    const publisher = publisherFor(backend, {
      backendOptions: { kind: 'vllm', url: standin.url, model: MODEL },
      lora: true,
    });
    const dir = checkpoint('full', false);
    await assert.rejects(publisher.publish({ checkpoint: dir, version: 5 }), (e: Error) => {
      assert.ok(e instanceof PublishError && PolarError.isInstance(e));
      assert.match(e.message, /holds no LoRA adapter/);
      assert.match(String((e as PolarError).hint), /--reload-cmd/);
      return true;
    });
  });
});

describe('vLLM started without runtime LoRA updating', () => {
  test('the load is refused with the flags to start it with; without --lora, the weight-transfer flags or --reload-cmd', async () => {
    const standin = await startStandin({ model: MODEL });
    const backend = await createBackend({ kind: 'vllm', url: standin.url, model: MODEL });
    try {
      const options = { backendOptions: { kind: 'vllm' as const, url: standin.url, model: MODEL } };
      // full weights: the server offers no weight-transfer API (no dev mode), said before any rollout
      await assert.rejects(publisherFor(backend, options).prepare!(0), (e: Error) => {
        assert.ok(PolarError.isInstance(e));
        assert.match(e.message, /offers no weight-transfer API/);
        assert.match(
          String((e as PolarError).hint),
          /VLLM_SERVER_DEV_MODE=1 .*--weight-transfer-config.*--reload-cmd/,
        );
        return true;
      });
      const publisher = publisherFor(backend, { ...options, lora: true });
      await assert.rejects(
        publisher.publish({ checkpoint: checkpoint('step-1'), version: 1 }),
        (e: Error) => {
          assert.ok(PolarError.isInstance(e));
          assert.match(e.message, /refused to load the LoRA adapter polar-step-1 .*\(404\)/);
          assert.match(String((e as PolarError).hint), /VLLM_ALLOW_RUNTIME_LORA_UPDATING=True/);
          return true;
        },
      );
      assert.equal((await call(backend)).type, 'finish');
      assert.equal(standin.calls.at(-1)!.body.model, MODEL, 'a refused publish leaves the calls on the base');
    } finally {
      await backend.close();
      await standin.close();
    }
  });
});
