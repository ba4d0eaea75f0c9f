/**
 * `polar doctor` of the embedded backend checks that its model can be loaded here (issue 47 item 4): it
 * said "ready" offline for the default hub model it could not download, and `polar capture` failed a
 * minute later. In the cache: ready. Not in the cache: ready when the hub answers (downloaded on first
 * use), not ready (exit 4) when it cannot be reached or POLAR_OFFLINE=1, naming the offline ways (the tiny
 * model made in one command). A local folder must hold what the engine loads.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { embeddedModelCheck } from '../../../src/doctor/model.ts';
import { DEFAULTS } from '../../../src/options/defaults.ts';
import { closedUrl, polarInProcess } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';

const MODEL = DEFAULTS.embeddedModel.value;
const tmp = tempDir('polar-doctor-model-');

function put(dir: string, files: string[]): string {
  for (const f of files) {
    mkdirSync(join(dir, f, '..'), { recursive: true });
    writeFileSync(join(dir, f), f.endsWith('config.json') ? '{"model_type": "qwen3"}' : 'x');
  }
  return dir;
}

/** A stand-in hub answering `status` to every request, and the paths it was asked for. */
async function hub(status: number): Promise<{ url: string; asked: string[]; close: () => Promise<void> }> {
  const asked: string[] = [];
  const server = createServer((req, res) => {
    asked.push(`${req.method} ${req.url}`);
    res.writeHead(status).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/`,
    asked,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

describe('polar doctor: the embedded model', () => {
  test('the default model in the cache: ready, without the network', async () => {
    const cache = put(join(tmp, 'full'), [
      `${MODEL}/config.json`,
      `${MODEL}/generation_config.json`,
      `${MODEL}/onnx/model_q4.onnx`,
      `${MODEL}/tokenizer.json`,
      `${MODEL}/tokenizer_config.json`,
    ]);
    const check = await embeddedModelCheck(MODEL, 'q4', { cacheDir: cache, hub: await closedUrl('/') });
    assert.equal(check.status, 'ok', check.detail);
    assert.match(check.detail, /is in the cache/);
  });

  test('not in the cache, the hub answers: ready, downloaded on first use (asked for its config)', async () => {
    const h = await hub(200);
    try {
      const check = await embeddedModelCheck(MODEL, 'q4', { cacheDir: join(tmp, 'empty-1'), hub: h.url });
      assert.equal(check.status, 'ok', check.detail);
      assert.match(check.detail, /not in the cache .*answers: downloaded on first use/);
      assert.deepEqual(h.asked, [`HEAD /${MODEL}/resolve/main/config.json`]);
    } finally {
      await h.close();
    }
  });

  test('not in the cache, the hub does not have it (404): not ready, check the id', async () => {
    const h = await hub(404);
    try {
      const check = await embeddedModelCheck('nobody/nothing', 'q4', {
        cacheDir: join(tmp, 'e2'),
        hub: h.url,
      });
      assert.equal(check.status, 'fail');
      assert.match(check.detail, /answers 404/);
      assert.match(check.fix!, /check the model id/);
    } finally {
      await h.close();
    }
  });

  test('not in the cache, the hub cannot be reached: not ready, the offline ways', async () => {
    const check = await embeddedModelCheck(MODEL, 'q4', {
      cacheDir: join(tmp, 'e3'),
      hub: await closedUrl('/'),
    });
    assert.equal(check.status, 'fail');
    assert.match(check.detail, /cannot be reached \(ECONNREFUSED\): the first call would fail/);
    assert.match(check.fix!, /polar export tiny:arch=qwen3,vocab=151669,stop_bias=40 --out tiny-model/);
  });

  test('polar doctor offline (POLAR_OFFLINE=1), a model not in the cache: exit 4, the tiny model named', async () => {
    const r = await polarInProcess(['doctor', '--model', 'polar-test/not-cached'], {
      env: { POLAR_OFFLINE: '1' },
    });
    assert.equal(r.code, 4, r.stdout);
    assert.match(r.stdout, /model polar-test\/not-cached: NOT READY/);
    assert.match(r.stdout, /FAIL model .*not in the cache .*POLAR_OFFLINE=1 forbids the download/);
    assert.match(r.stdout, /fix: make a tiny model offline in one command: polar export tiny:/);
  });

  test('a local folder: ready when it holds what the engine loads; an ONNX-less checkpoint is named', async () => {
    const good = put(join(tmp, 'onnx-model'), [
      'config.json',
      'tokenizer.json',
      'tokenizer_config.json',
      'onnx/model.onnx',
    ]);
    const ok = await polarInProcess(['doctor', '--model', good]);
    assert.equal(ok.code, 0, ok.stdout);
    assert.match(ok.stdout, /ok {3}model {12}local model directory/);
    const ckpt = put(join(tmp, 'ckpt'), ['config.json', 'model.safetensors']);
    const check = await embeddedModelCheck(ckpt, 'fp32');
    assert.equal(check.status, 'fail');
    assert.match(check.detail, /lacks tokenizer\.json, tokenizer_config\.json, onnx\/\*\.onnx/);
    assert.match(check.fix!, /polar export CKPT --out DIR/);
  });
});
