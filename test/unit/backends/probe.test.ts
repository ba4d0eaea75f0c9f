/**
 * The server set-up probe against the stand-ins: a good set-up is ready, a wrong one fails with the
 * flag that fixes it, a server that is down, answers HTML or speaks another API is one line naming
 * the URL; the readiness wait polls the route the server really serves, with a countdown.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import {
  assertProbe,
  BackendSetupError,
  formatProbeReport,
  probeBackend,
} from '../../../src/backends/probe.ts';
import type { BackendOptions } from '../../../src/backends/types.ts';
import { waitForBackend } from '../../../src/backends/wait.ts';
import { PolarError } from '../../../src/errors.ts';
import { startCompletionsStandIn } from '../../support/completions-standin.ts';
import { startNemoRlStandin } from '../../support/nemo-rl-standin.ts';
import { IM_END } from '../../support/qwen-tokenizer.ts';
import { type StandinOptions, startStandin } from '../../support/vllm-standin.ts';

const statusOf = (report: Awaited<ReturnType<typeof probeBackend>>) =>
  Object.fromEntries(report.checks.map((c) => [c.name, c.status]));

async function vllm(options: StandinOptions, probe: Partial<BackendOptions> = {}) {
  const standin = await startStandin(options);
  try {
    return await probeBackend({ kind: 'vllm', url: standin.url, model: 'Qwen/Qwen3-4B', ...probe });
  } finally {
    await standin.close();
  }
}

async function serve(
  answer: (res: import('node:http').ServerResponse) => void,
): Promise<{ server: Server; url: string }> {
  const server = createServer((_req, res) => answer(res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
}

describe('probe: vLLM chat', () => {
  test('a good set-up: ready, with the context and the logprobs-mode advice', async () => {
    const report = await vllm({ maxModelLen: 8192 });
    assert.equal(report.ok, true);
    assert.deepEqual(statusOf(report), {
      server: 'ok',
      model: 'ok',
      context: 'ok',
      token_ids: 'ok',
      tool_calling: 'ok',
      reasoning_parser: 'skip',
      logprobs_mode: 'warn',
    });
    assert.equal(report.maxModelLen, 8192);
    const text = formatProbeReport(report);
    assert.match(text, /: ready$/m);
    assert.match(
      text,
      /fix: for truncated importance sampling start vLLM with --logprobs-mode processed_logprobs/,
    );
    assert.doesNotThrow(() => assertProbe(report));
  });

  test('started without auto tool choice: one error naming the flags to add', async () => {
    const report = await vllm({ toolParser: false });
    assert.equal(report.ok, false);
    assert.equal(statusOf(report).tool_calling, 'fail');
    assert.throws(
      () => assertProbe(report),
      (error: unknown) => {
        assert.ok(error instanceof BackendSetupError && PolarError.isInstance(error));
        assert.match(error.message, /tool_calling: requests with tools are refused/);
        assert.match(error.hint!, /--enable-auto-tool-choice --tool-call-parser/);
        return true;
      },
    );
  });

  test('another model served: names what is served', async () => {
    const report = await vllm({}, { model: 'Qwen/Qwen3-8B' });
    assert.equal(statusOf(report).model, 'fail');
    const check = report.checks.find((c) => c.name === 'model')!;
    assert.match(check.detail, /serves Qwen\/Qwen3-4B, not Qwen\/Qwen3-8B/);
    assert.match(check.fix!, /--model Qwen\/Qwen3-4B/);
  });

  test('a server with --api-key: a probe without it is told which option to pass', async () => {
    const without = await vllm({ apiKey: 'k' });
    assert.equal(statusOf(without).server, 'fail');
    assert.equal(without.checks[0]!.fix, '--api-key KEY');
    const withKey = await vllm({ apiKey: 'k' }, { apiKey: 'k' });
    assert.equal(withKey.ok, true);
  });
});

describe('probe: bad servers, one line each', () => {
  test('down', async () => {
    const { server, url } = await serve(() => {});
    await new Promise<void>((r) => server.close(() => r()));
    const report = await probeBackend({ kind: 'vllm', url, model: 'm' });
    assert.equal(report.ok, false);
    const line = report.checks[0]!.detail;
    assert.match(line, new RegExp(`${url}/models.*unreachable: ECONNREFUSED`));
    assert.ok(!line.includes('\n'));
  });

  test('an HTML page', async () => {
    const { server, url } = await serve((res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!DOCTYPE html>\n<html><head><title>Jupyter</title></head></html>');
    });
    try {
      const report = await probeBackend({ kind: 'vllm', url, model: 'm' });
      const line = report.checks[0]!.detail;
      assert.match(line, /answered an HTML page, not a JSON error.*where JSON was expected/);
      assert.ok(!line.includes('\n'));
    } finally {
      server.close();
    }
  });

  test('another API (JSON, but not a model list)', async () => {
    const { server, url } = await serve((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: 'healthy', version: '1.2' }));
    });
    try {
      const report = await probeBackend({ kind: 'vllm', url, model: 'm' });
      assert.match(report.checks[0]!.detail, /not an OpenAI model list/);
    } finally {
      server.close();
    }
  });
});

describe('probe: token path and NeMo RL', () => {
  for (const server of ['vllm', 'sglang'] as const) {
    test(`--backend tokens over ${server}: ids come back, tools are polar's`, async () => {
      const standin = await startCompletionsStandIn({ script: [[IM_END]] });
      try {
        const url = server === 'vllm' ? standin.url : `${standin.url}/generate`;
        const report = await probeBackend({ kind: 'tokens', url, model: 'standin' });
        assert.equal(report.ok, true, formatProbeReport(report));
        assert.equal(statusOf(report).token_ids, 'ok');
      } finally {
        await standin.close();
      }
    });
  }

  test('NeMo RL: /tokenize and one token with the run temperature; a wrong one names --temperature', async () => {
    const standin = await startNemoRlStandin({ temperature: 0.7, maxModelLen: 16384 });
    try {
      const good = await probeBackend({ kind: 'nemo-rl', url: standin.url, model: 'm', temperature: 0.7 });
      assert.equal(good.ok, true, formatProbeReport(good));
      assert.equal(good.maxModelLen, 16384);
      const bad = await probeBackend({ kind: 'nemo-rl', url: standin.url, model: 'm' });
      assert.equal(statusOf(bad).token_ids, 'fail');
      assert.match(bad.checks.find((c) => c.name === 'token_ids')!.fix!, /--temperature and --top-p/);
    } finally {
      await standin.close();
    }
  });
});

describe('waitForBackend', () => {
  test('waits with a countdown until the server answers /v1/models', async () => {
    const { server: probe, url } = await serve(() => {});
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    let started: Server | null = null;
    const ticks: number[] = [];
    const paths: string[] = [];
    await waitForBackend(
      { kind: 'vllm', url, model: 'm', apiKey: 'k' },
      {
        timeoutMs: 60_000,
        tickMs: 0,
        onWait: (left) => {
          ticks.push(left);
          if (started) return;
          started = createServer((req, res) => {
            paths.push(`${req.url} ${req.headers.authorization}`);
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end('{"object":"list","data":[]}');
          });
          started.listen(port, '127.0.0.1');
        },
      },
    );
    (started as Server | null)?.close();
    assert.ok(ticks.length >= 1 && ticks[0]! <= 60);
    assert.deepEqual(paths, ['/v1/models Bearer k']);
  });

  test('a server that takes connections and never answers: the wait ends at its deadline, not a poll later', async () => {
    const { createServer: tcpServer } = await import('node:net');
    const held: import('node:net').Socket[] = [];
    const silent = tcpServer((socket) => held.push(socket));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/v1`;
    const t0 = Date.now();
    try {
      await assert.rejects(
        waitForBackend({ kind: 'vllm', url, model: 'm' }, { timeoutMs: 1500 }),
        /did not answer within 2 s/,
      );
      // each poll used to wait its whole 5 s: a 1.5 s wait ended after 10 s
      const took = Date.now() - t0;
      assert.ok(took < 4500, `a 1.5 s wait took ${took} ms`);
    } finally {
      for (const socket of held) socket.destroy();
      silent.close();
    }
  });

  test('gives up after --backend-timeout with one line naming the URL', async () => {
    const { server, url } = await serve(() => {});
    await new Promise<void>((r) => server.close(() => r()));
    await assert.rejects(
      waitForBackend({ kind: 'nemo-rl', url, model: 'm' }, { timeoutMs: 1 }),
      (error: Error) => {
        assert.ok(PolarError.isInstance(error));
        assert.match(
          error.message,
          new RegExp(`server at ${url.replace(/\/v1$/, '')}/tokenize did not answer within 0 s`),
        );
        return true;
      },
    );
  });
});

describe('ensureBackendReady (what capture, serve, eval, loop and gym run first)', () => {
  test('nothing listens on a loopback URL: fails at once with the fix, no 10-minute countdown', async () => {
    const { ensureBackendReady } = await import('../../../src/backends/wait.ts');
    const { server, url } = await serve(() => {});
    await new Promise<void>((r) => server.close(() => r()));
    const t0 = Date.now();
    await assert.rejects(
      ensureBackendReady({ kind: 'vllm', url, model: 'Qwen/Qwen3-4B', timeoutMs: 600_000 }),
      (error: unknown) =>
        PolarError.isInstance(error) &&
        error.exitCode === 4 &&
        /nothing listens at http:\/\/127\.0\.0\.1:\d+ \(connection refused\)/.test(error.message) &&
        /vllm serve Qwen\/Qwen3-4B --port \d+/.test(String(error.hint)) &&
        /polar doctor .* --wait/.test(String(error.hint)),
    );
    assert.ok(Date.now() - t0 < 5000, 'failed at once');
    const { isLoopbackUrl } = await import('../../../src/backends/wait.ts');
    assert.deepEqual(
      [
        'http://127.0.0.1:8000/v1',
        'http://localhost:1/v1',
        'http://[::1]:8000',
        'http://10.0.0.2:8000/v1',
      ].map(isLoopbackUrl),
      [true, true, true, false],
    );
  });

  test('a ready server passes; one without tool calling stops with the flag to add', async () => {
    const { ensureBackendReady } = await import('../../../src/backends/wait.ts');
    const good = await startStandin();
    const bad = await startStandin({ toolParser: false });
    try {
      await ensureBackendReady({ kind: 'vllm', url: good.url, model: 'Qwen/Qwen3-4B', timeoutMs: 10_000 });
      await assert.rejects(
        ensureBackendReady({ kind: 'vllm', url: bad.url, model: 'Qwen/Qwen3-4B', timeoutMs: 10_000 }),
        (error: unknown) =>
          error instanceof BackendSetupError && /--enable-auto-tool-choice/.test(error.hint ?? ''),
      );
      // --no-require-token-ids turns a missing-ids failure into a warning, nothing else
      const report = await probeBackend({
        kind: 'vllm',
        url: bad.url,
        model: 'Qwen/Qwen3-4B',
        requireTokenIds: false,
      });
      assert.equal(report.ok, false, 'tool calling still fails');
    } finally {
      await good.close();
      await bad.close();
    }
  });
});
