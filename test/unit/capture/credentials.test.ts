/**
 * Issue 22, item 3: credentials in a backend URL (`http://user:PW@host/v1?api_key=Q`) stay out of
 * everything polar stores or prints: the capture's session record (it kept the URL verbatim), its call
 * records (`backend_request.url` kept the userinfo; error messages quote the URL), polar's stderr,
 * polar serve's /status, polar gym's unauthenticated GET /health, and what the harness is answered.
 * Real requests on 127.0.0.1 against the vLLM stand-in. One function does it: redactUrl in
 * src/util/redact.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startGym } from '../../../src/gym/server.ts';
import { LocalRuntime } from '../../../src/rollout/runtime/local.ts';
import { startServe } from '../../../src/serve/serve.ts';
import { captureArgs, privateDirs, privateEnv, scriptHarness } from '../../support/capture-run.ts';
import { runPolar } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

const USER = 'polaruser';
const PASSWORD = 'S3cretPassw0rd';
const QUERY_KEY = 'Qkey0123456789';
const SECRETS = [PASSWORD, QUERY_KEY, USER];

function withUserinfo(url: string): string {
  return url.replace('http://', `http://${USER}:${PASSWORD}@`);
}

function withCredentials(url: string): string {
  return `${withUserinfo(url)}?api_key=${QUERY_KEY}`;
}

function assertClean(text: string, where: string): void {
  for (const secret of SECRETS)
    assert.ok(!text.includes(secret), `${where} holds ${secret}:\n${text.slice(0, 3000)}`);
}

describe('backend credentials are redacted wherever a URL is stored or printed', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin();
  });
  after(() => standin.close());

  test('polar capture: the capture file, its error messages, stderr and the harness answer', async () => {
    const { home, workdir, out } = await privateDirs();
    // the first call fails (the server answers 500: the error message quotes the URL), the second works
    standin.faults.push({ status: 500, message: 'injected' });
    const harness = scriptHarness(`
      for (let i = 0; i < 2; i++) {
        const r = await chat('hi');
        console.log('harness got ' + r.status + ' ' + (await r.text()));
      }`);
    const r = await runPolar(captureArgs(out, withUserinfo(standin.url), harness, ['--skip-backend-check']), {
      cwd: workdir,
      env: privateEnv(home),
      extendEnv: false,
      timeoutMs: 60_000,
    });
    assert.match(String(r.stdout), /harness got 502 .*<redacted>@127/);
    assert.match(String(r.stdout), /harness got 200/);
    const text = readFileSync(out, 'utf8');
    assert.match(text, /"backend":\{"kind":"vllm","url":"http:\/\/<redacted>@127\.0\.0\.1:\d+\/v1"/);
    assert.match(
      text,
      /"backend_request":\{"url":"http:\/\/<redacted>@127\.0\.0\.1:\d+\/v1\/chat\/completions"/,
    );
    assert.match(text, /"error":\{"kind":"backend_error","message":"backend http:\/\/<redacted>@/);
    assertClean(text, 'the capture');
    assertClean(String(r.stdout), 'what the harness was answered');
    assertClean(String(r.stderr), 'stderr');
  });

  test('polar capture waiting for the server: its countdown and its error', async (t) => {
    const { home, workdir, out } = await privateDirs();
    // a server that takes connections and never answers (a refused port fails at once, with no wait)
    const held: Socket[] = [];
    const silent = createServer((socket) => held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    t.after(() => {
      for (const socket of held) socket.destroy();
      silent.close();
    });
    const r = await runPolar(
      captureArgs(out, withCredentials(`http://127.0.0.1:${port}/v1`), ['true'], ['--backend-timeout', '2']),
      { cwd: workdir, env: privateEnv(home), extendEnv: false, timeoutMs: 60_000 },
    );
    assert.equal(r.exitCode, 4);
    assert.match(String(r.stderr), /did not answer within 2 s/);
    assertClean(String(r.stderr), 'stderr');
  });

  test('polar serve: /status and the session record', async () => {
    const captures = tempDir('polar-cred-serve-');
    const s = await startServe({
      backend: { kind: 'vllm', url: withCredentials(standin.url), model: 'Qwen/Qwen3-4B', skipCheck: true },
      port: 0,
      captures,
    });
    try {
      const auth = { authorization: `Bearer ${s.adminToken}` };
      const status = await (await fetch(`${s.url}/status`, { headers: auth })).text();
      assert.match(status, /<redacted>@127\.0\.0\.1/);
      assertClean(status, '/status');
      const session = (await (
        await fetch(`${s.url}/sessions`, { method: 'POST', headers: auth, body: '{}' })
      ).json()) as { id: string; capture: string };
      await fetch(`${s.url}/sessions/${session.id}`, { method: 'DELETE', headers: auth });
      assertClean(readFileSync(session.capture, 'utf8'), 'the capture');
    } finally {
      await s.close(1000);
    }
  });

  test('polar gym: the unauthenticated GET /health', async () => {
    const out = tempDir('polar-cred-gym-');
    const gym = await startGym({
      harness: 'pi',
      backend: { kind: 'vllm', model: 'Qwen/Qwen3-4B' },
      backendUrls: [withCredentials(standin.url), withCredentials('http://127.0.0.1:9/v1')],
      probe: false,
      runtime: new LocalRuntime({ reposDir: tempDir('polar-cred-repos-') }),
      placement: 'host',
      out: join(out, 'runs'),
      port: 0,
    });
    try {
      const health = await (await fetch(`${gym.url}/health`)).text();
      assert.match(health, /<redacted>@127\.0\.0\.1/);
      assertClean(health, '/health');
    } finally {
      await gym.close();
    }
  });
});
