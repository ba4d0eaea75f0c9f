/**
 * Issue 18's conventions and checks in the option layer: a training checkpoint on the embedded backend,
 * output paths checked before anything starts.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { UsageError } from '../../../src/errors.ts';
import { backendOptions } from '../../../src/options/backend.ts';

const tmp = mkdtempSync(join(tmpdir(), 'polar-conventions-'));

describe('backend flags', () => {
  test('a polar train checkpoint on the embedded backend: served by vLLM/SGLang or exported first', () => {
    const ckpt = join(tmp, 'ckpt');
    mkdirSync(join(ckpt, 'step-1'), { recursive: true });
    writeFileSync(join(ckpt, 'latest'), 'step-1\n');
    writeFileSync(join(ckpt, 'step-1', 'config.json'), '{}');
    writeFileSync(join(ckpt, 'step-1', 'model.safetensors'), '');
    for (const model of [`${ckpt}/`, join(ckpt, 'step-1')]) {
      assert.throws(
        () => backendOptions({ model }),
        (e: unknown) =>
          e instanceof UsageError &&
          /a training checkpoint without onnx\/model\.onnx/.test(e.message) &&
          /--backend vllm/.test(String(e.hint)) &&
          /polar export/.test(String(e.hint)),
      );
    }
    // an exported model directory is fine
    const onnx = join(tmp, 'exported');
    mkdirSync(join(onnx, 'onnx'), { recursive: true });
    assert.equal(backendOptions({ model: onnx }).model, onnx);
    // the same checkpoint behind a server is fine
    assert.equal(backendOptions({ backendUrl: 'http://127.0.0.1:8000/v1', model: ckpt }).kind, 'vllm');
  });

  test('a server backend without --backend-url is refused when the flags are read', () => {
    assert.throws(
      () => backendOptions({ backend: 'sglang', model: 'm' }),
      /--backend sglang needs --backend-url/,
    );
  });
});
