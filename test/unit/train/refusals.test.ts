/**
 * `polar train` refuses up front what it cannot train (issue 47 item 4), before any Python starts: an
 * ONNX model folder (README's `polar export tiny:... --out tiny-model`, what the embedded backend serves)
 * used to load and then fail in the worker on a missing model.safetensors; now it is exit 2 naming what
 * to train instead (the spec it was exported from). A capture file given as trajectories said
 * "session: Invalid input"; now it says it is a capture and names `polar build`.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { polarInProcess } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';
import { smallBatch } from './fixtures.ts';

const tmp = tempDir('polar-train-refusals-');
const batch = join(tmp, 'batch.jsonl');
writeFileSync(
  batch,
  smallBatch()
    .map((r) => `${JSON.stringify(r)}\n`)
    .join(''),
);

/** A model folder with `files` ({path: content}). */
function folder(name: string, files: Record<string, string>): string {
  const dir = join(tmp, name);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

const ONNX = { 'onnx/model.onnx': 'x', 'tokenizer.json': '{}', 'tokenizer_config.json': '{}' };

describe('polar train refuses what it cannot train, before the worker', () => {
  test('an ONNX export: exit 2, naming the tiny spec it was exported from', async () => {
    const spec = 'tiny:arch=qwen3,vocab=151669,stop_bias=40';
    const model = folder('tiny-model', {
      ...ONNX,
      'config.json': JSON.stringify({ model_type: 'llama', polar_export: { source: spec } }),
    });
    const out = join(tmp, 'out-1');
    const r = await polarInProcess(['train', batch, '--model', model, '--out', out]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(
      r.stderr,
      /is an ONNX model \(for the embedded backend, onnx\/\): it holds no weights to train/,
    );
    assert.ok(r.stderr.includes(`train what it was exported from: --model '${spec}'`), r.stderr);
    assert.ok(!existsSync(out), 'nothing written');
  });

  test('an ONNX folder that does not say its source: the tiny spec of the README', async () => {
    const model = folder('onnx-only', { ...ONNX, 'config.json': '{"model_type": "qwen3"}' });
    const r = await polarInProcess(['train', batch, '--model', model, '--out', join(tmp, 'out-2')]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--model 'tiny:arch=qwen3,vocab=151669,stop_bias=40'/);
  });

  test('a folder with a config and no weights: named', async () => {
    const model = folder('config-only', { 'config.json': '{"model_type": "qwen3"}' });
    const r = await polarInProcess(['train', batch, '--model', model, '--out', join(tmp, 'out-3')]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /no weights there \(model\.safetensors/);
  });

  test('a capture given as trajectories: exit 3, it is a capture, polar build', async () => {
    const capture = join(tmp, 'run.jsonl');
    const session = { v: 2, type: 'session', id: 'sess_1', harness: 'pi', argv: ['pi'], cwd: tmp };
    writeFileSync(capture, `${JSON.stringify(session)}\n`);
    const r = await polarInProcess([
      'train',
      capture,
      '--model',
      'tiny:vocab=32',
      '--out',
      join(tmp, 'out-4'),
    ]);
    assert.equal(r.code, 3, r.stderr);
    assert.match(
      r.stderr,
      /run\.jsonl:1: this is a capture \(a "session" record of polar capture\), not a trajectory file/,
    );
    assert.match(r.stderr, /build its trajectories first: polar build .*run\.jsonl -o traj\.jsonl/);
  });
});
