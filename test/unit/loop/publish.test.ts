/**
 * Publishing new weights: SGLang's /update_weights_from_disk and the readiness wait after --reload-cmd
 * carry the run's API key, and the wait polls the route the server really serves (/v1/models) for every
 * backend kind.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import type { Backend, BackendOptions } from '../../../src/backends/types.ts';
import { PolarError } from '../../../src/errors.ts';
import { PublishError, publisherFor } from '../../../src/loop/publish.ts';
import { closedUrl } from '../../support/cli.ts';

interface Seen {
  method: string;
  path: string;
  authorization: string | undefined;
  body: string;
}

/**
 * A server started with `--api-key KEY`, as SGLang checks it (python/sglang/srt/utils.py,
 * add_api_key_middleware: every route but /health and /metrics needs `Authorization: Bearer KEY`, else
 * 401 {"error": "Unauthorized"}); /update_weights_from_disk answers as SGLang's http_server.py does
 * ({success, message, num_paused_requests}); /v1/models answers 503 `down` times first (a restarting
 * server behind a gateway), then its model list.
 */
async function keyedServer(key: string, down = 0) {
  const seen: Seen[] = [];
  let polls = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (d: Buffer) => {
      body += d.toString();
    });
    req.on('end', () => {
      const path = req.url ?? '';
      seen.push({ method: req.method ?? '', path, authorization: req.headers.authorization, body });
      const send = (status: number, value: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value));
      };
      if (!path.startsWith('/health') && req.headers.authorization !== `Bearer ${key}`)
        return send(401, { error: 'Unauthorized' });
      if (path === '/update_weights_from_disk')
        return send(200, {
          success: true,
          message: 'Succeeded to update model weights.',
          num_paused_requests: 0,
        });
      if (path === '/v1/models') {
        if (polls++ < down) return send(503, { error: 'restarting' });
        return send(200, { object: 'list', data: [{ id: 'm', object: 'model' }] });
      }
      send(404, { detail: 'Not Found' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { root, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const backendOf = (kind: Backend['kind'], url: string) => ({ kind, url }) as unknown as Backend;

describe('publisherFor', () => {
  test("SGLang's weight update from disk carries the run's key", async () => {
    const s = await keyedServer('secret');
    try {
      const url = `${s.root}/v1`;
      const options: BackendOptions = { kind: 'sglang', url, model: 'm', apiKey: 'secret' };
      await publisherFor(backendOf('sglang', url), { backendOptions: options }).publish({
        checkpoint: '/ckpt/step-1',
      });
      const update = s.seen.find((x) => x.path === '/update_weights_from_disk')!;
      assert.equal(update.authorization, 'Bearer secret');
      assert.deepEqual(JSON.parse(update.body), { model_path: '/ckpt/step-1' });
      // without the key the server refuses, and the error names the option
      const without = publisherFor(backendOf('sglang', url), {
        backendOptions: { kind: 'sglang', url, model: 'm' },
      });
      await assert.rejects(without.publish({ checkpoint: '/ckpt/step-1' }), (error: unknown) => {
        assert.ok(error instanceof PublishError);
        assert.match(error.message, /refused the weight update \(401\)/);
        assert.match(error.hint ?? '', /--api-key/);
        return true;
      });
    } finally {
      await s.close();
    }
  });

  for (const [kind, suffix] of [
    ['vllm', '/v1'],
    ['tokens', '/generate'],
    ['tokens', ''],
  ] as const) {
    test(`--weight-sync restart (${kind} at ROOT${suffix}): waits on /v1/models with the key until it answers`, async () => {
      const s = await keyedServer('secret', 2);
      try {
        const url = `${s.root}${suffix}`;
        const options: BackendOptions = { kind, url, model: 'm', apiKey: 'secret' };
        await publisherFor(backendOf(kind, url), {
          backendOptions: options,
          reloadCmd: 'true',
          weightSync: 'restart',
          readyTimeoutMs: 60_000,
        }).publish({ checkpoint: '/ckpt' });
        const polls = s.seen.filter((x) => x.method === 'GET');
        assert.ok(polls.length >= 3, 'two 503s, then the answer');
        assert.ok(polls.every((x) => x.path === '/v1/models' && x.authorization === 'Bearer secret'));
      } finally {
        await s.close();
      }
    });
  }

  test('vLLM without the weight-transfer API and --reload-cmd: probed once, then each publish restarts it', async () => {
    const s = await keyedServer('secret', 2);
    try {
      const url = `${s.root}/v1`;
      const publisher = publisherFor(backendOf('vllm', url), {
        backendOptions: { kind: 'vllm', url, model: 'm', apiKey: 'secret' },
        reloadCmd: 'true',
        readyTimeoutMs: 60_000,
      });
      await publisher.prepare!(0);
      const probed = s.seen.length;
      assert.ok(
        probed > 0 && s.seen.every((x) => x.authorization === 'Bearer secret'),
        'the probe carries the key',
      );
      await publisher.publish({ checkpoint: '/ckpt', version: 1 });
      const after = s.seen.slice(probed);
      assert.ok(after.length >= 3, 'two 503s, then the answer');
      assert.ok(
        after.every((x) => x.path === '/v1/models'),
        'a restart, no weight route',
      );
    } finally {
      await s.close();
    }
  });

  test('--weight-sync restart without --reload-cmd is refused, naming the flag', () => {
    assert.throws(
      () =>
        publisherFor(backendOf('vllm', 'http://127.0.0.1:1/v1'), {
          backendOptions: { kind: 'vllm', url: 'http://127.0.0.1:1/v1', model: 'm' },
          weightSync: 'restart',
        }),
      (e: unknown) =>
        PolarError.isInstance(e) && /--reload-cmd/.test(`${(e as Error).message} ${(e as PolarError).hint}`),
    );
  });

  test('--reload-cmd and a server that never comes back: a PublishError naming the URL and the command', async () => {
    const s = await keyedServer('k');
    await s.close();
    const url = `${s.root}/v1`;
    await assert.rejects(
      publisherFor(backendOf('vllm', url), {
        backendOptions: { kind: 'vllm', url, model: 'm' },
        reloadCmd: 'true',
        readyTimeoutMs: 1,
      }).publish({ checkpoint: '/ckpt' }),
      (error: unknown) => {
        assert.ok(error instanceof PublishError && PolarError.isInstance(error));
        assert.match(error.message, new RegExp(`${s.root}/v1/models did not answer within`));
        assert.match(error.hint ?? '', /--reload-cmd/);
        return true;
      },
    );
  });

  test("SGLang's weight update against a server that is gone: a PublishError naming the URL, no stack", async () => {
    const url = `${await closedUrl('')}/generate`;
    await assert.rejects(
      publisherFor(backendOf('tokens', url), { backendOptions: { kind: 'tokens', url, model: 'm' } }).publish(
        {
          checkpoint: '/ckpt/step-1',
        },
      ),
      (error: unknown) => {
        assert.ok(error instanceof PublishError);
        assert.match(
          error.message,
          /weight update at http:\/\/127\.0\.0\.1:\d+\/update_weights_from_disk failed: .*ECONNREFUSED/,
        );
        return true;
      },
    );
  });
});
