/** `polar capture` as a process: exit codes, signal forwarding, the generic profile's env, stdout passthrough. */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readCapture } from '../../src/capture/reader.ts';
import type { CaptureRecord } from '../../src/capture/record.ts';
import { capture, captureArgs, privateDirs, privateEnv } from '../support/capture-run.ts';
import { closedUrl, runPolar, startPolar } from '../support/cli.ts';
import { type Standin, startStandin } from '../support/vllm-standin.ts';

describe('polar capture process', () => {
  let standin: Standin;
  let backend: string[];
  before(async () => {
    standin = await startStandin();
    backend = ['--backend', 'vllm', '--backend-url', standin.url, '--model', 'Qwen/Qwen3-4B'];
  });
  after(() => standin.close());

  test('exits with the harness exit code and records it', async () => {
    const r = await capture(
      [...backend, '--harness', 'generic'],
      ['sh', '-c', 'echo out; echo err >&2; exit 3'],
    );
    assert.equal(r.exitCode, 3);
    assert.equal(r.stdout.trim(), 'out', 'harness stdout passes through untouched, polar writes none');
    assert.match(r.stderr, /err/);
    assert.equal(r.end?.exit_code, 3);
    assert.equal(r.end?.status, 'error');
  });

  test('generic profile: OPENAI_* env reaches the proxy with the per-run key; session meta recorded', async () => {
    const script = `
      const r = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
        method: 'POST',
        headers: { authorization: 'Bearer ' + process.env.OPENAI_API_KEY, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'anything', messages: [{ role: 'user', content: 'hi' }] }),
      });
      const j = await r.json();
      console.log(j.choices[0].message.content);
      const bad = await fetch(process.env.OPENAI_BASE_URL + '/models');
      console.log('unauth', bad.status);`;
    const r = await capture(
      [...backend, '--task-id', 'task-1', '--sample', '2', '--meta', 'run=ci', '--meta', 'k=v'],
      ['node', '--input-type=module', '-e', script],
    );
    assert.equal(r.exitCode, 0, r.stderr);
    assert.match(r.stdout, /Hello from the stand-in\./);
    assert.match(r.stdout, /unauth 401/);
    assert.equal(r.session.harness, 'generic');
    assert.equal(r.session.task_id, 'task-1');
    assert.equal(r.session.sample, 2);
    assert.deepEqual(r.session.meta, { run: 'ci', k: 'v' });
    assert.equal(r.calls.length, 1);
    assert.equal(r.calls[0]!.stream, false);
    assert.equal(r.end?.unauthorized_requests, 1);
    // the per-run key never lands in the capture
    const text = await readFile(r.file, 'utf8');
    assert.doesNotMatch(text, /polar-[0-9a-f]{48}/);
    assert.match(JSON.stringify(r.calls[0]!.request.headers), /Bearer <redacted>/);
  });

  test('SIGTERM is forwarded to the harness; the capture is complete up to the last call', async () => {
    const { home, workdir, out } = await privateDirs();
    const script = `
      const r = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
        method: 'POST',
        headers: { authorization: 'Bearer ' + process.env.OPENAI_API_KEY, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
      });
      await r.json();
      process.on('SIGTERM', () => { console.log('harness got SIGTERM'); process.exit(7); });
      console.log('ready');
      setInterval(() => {}, 1000);`;
    const child = startPolar(
      ['capture', '-o', out, ...backend, '--', 'node', '--input-type=module', '-e', script],
      { cwd: workdir, env: privateEnv(home), extendEnv: false },
    );
    await new Promise<void>((resolve) => {
      child.stdout!.on('data', (d: Buffer) => {
        if (d.toString().includes('ready')) resolve();
      });
    });
    child.kill('SIGTERM');
    const result = await child;
    assert.match(String(result.stdout), /harness got SIGTERM/);
    assert.equal(result.exitCode, 7);
    const records: CaptureRecord[] = [];
    for await (const { record } of readCapture(out)) records.push(record);
    assert.deepEqual(
      records.map((r) => r.type),
      ['session', 'call', 'session_end'],
    );
    const end = records[2] as Extract<CaptureRecord, { type: 'session_end' }>;
    assert.equal(end.status, 'interrupted');
    assert.equal(end.exit_code, 7);
  });

  test('a harness that does not exist: clear one-line error, no "capturing", no session (issue 31 item 12)', async () => {
    const { workdir } = await privateDirs();
    const out = join(workdir, 'none.jsonl');
    const r = await runPolar(['capture', ...backend, '-o', out, '--', 'no-such-harness-xyz']);
    assert.equal(r.exitCode, 4, r.stderr);
    assert.match(String(r.stderr), /could not start the harness `no-such-harness-xyz`: command not found/);
    assert.match(String(r.stderr), /on PATH/);
    assert.doesNotMatch(String(r.stderr), /capturing/);
    assert.doesNotMatch(String(r.stderr), /at .*\.ts:\d+/);
    assert.ok(!existsSync(out), 'no capture file, no empty error session');
  });

  test('bad flag values name the flag', async () => {
    const r = await runPolar(['capture', '--backend', 'nope', '--', 'true']);
    assert.equal(r.exitCode, 2);
    assert.match(String(r.stderr), /--backend nope is not one of vllm, sglang, openai, tokens, embedded/);
    const r2 = await runPolar(['capture', '--backend', 'vllm', '--model', 'm', '--', 'true']);
    assert.equal(r2.exitCode, 2);
    assert.match(String(r2.stderr), /needs --backend-url/);
  });
});

describe('polar capture output paths and flags, checked before anything starts', () => {
  const run = (args: string[]) => runPolar(['capture', ...args], { timeoutMs: 60_000 });
  const down = ['--backend-url', 'http://127.0.0.1:9/v1', '--model', 'm'];

  test('-o naming a directory or an unwritable place is a usage error, not a hang', async () => {
    const { workdir } = await privateDirs();
    const dir = await mkdtemp(join(workdir, 'out-'));
    const r = await run(['-o', dir, ...down, '--', 'true']);
    assert.equal(r.timedOut, false);
    assert.equal(r.exitCode, 2, String(r.stderr));
    assert.match(String(r.stderr), /polar: error: --output .* is a directory, not a file/);
    assert.doesNotMatch(String(r.stderr), /internal error|capturing/);
    const p = await run(['-o', '/proc/polar-x.jsonl', ...down, '--', 'true']);
    assert.equal(p.exitCode, 2, String(p.stderr));
    assert.match(String(p.stderr), /--output \/proc\/polar-x\.jsonl: cannot be written/);
  });

  test('parent folders of -o are created', async () => {
    const { workdir } = await privateDirs();
    const file = join(workdir, 'new', 'sub', 'run.jsonl');
    const r = await run(['-o', file, '--harness', 'generic', ...down, '--skip-backend-check', '--', 'true']);
    assert.equal(r.exitCode, 0, String(r.stderr));
    assert.ok(existsSync(file));
  });

  test('flag errors come before the "capturing ..." line', async () => {
    const r = await run(['--backend', 'vllm', '--model', 'm', '--', 'pi', '-p', 'hi']);
    assert.equal(r.exitCode, 2);
    assert.match(String(r.stderr), /--backend vllm needs --backend-url/);
    assert.doesNotMatch(String(r.stderr), /capturing/);
    const api = await run(['--pi-api', 'openai-responses', ...down, '--', 'codex', 'exec', 'hi']);
    assert.equal(api.exitCode, 2);
    assert.match(String(api.stderr), /--pi-api is for the pi harness/);
  });
});

describe('the embedded default offline', () => {
  test('says in one line how to point at a local model or a backend', async () => {
    const { home, workdir, out } = await privateDirs();
    const r = await runPolar(['capture', '-o', out, '--', 'pi', '-p', 'hi'], {
      cwd: workdir,
      env: { ...privateEnv(home), POLAR_OFFLINE: '1' },
      extendEnv: false,
    });
    assert.notEqual(r.exitCode, 0);
    assert.match(String(r.stderr), /onnx-community\/Qwen3-0\.6B-ONNX/);
    assert.match(String(r.stderr), /--model \.\/dir .* or at a server with --backend vllm --backend-url/);
    assert.doesNotMatch(String(r.stderr), /at .*\.ts:\d+/);
  });
});

describe('polar capture checks the server set-up before the harness starts', () => {
  /** runs capture with a harness that leaves a mark when it starts; returns the run and whether it did */
  async function probed(url: string, extra: string[] = []) {
    const { workdir } = await privateDirs();
    const mark = join(workdir, 'harness-started');
    const r = await runPolar(
      captureArgs(join(workdir, 'run.jsonl'), url, ['touch', mark], ['--harness', 'generic', ...extra]),
      { timeoutMs: 60_000 },
    );
    return { r, started: existsSync(mark), captured: existsSync(join(workdir, 'run.jsonl')) };
  }

  /** a local server answering every request with `answer` */
  async function httpServer(answer: (res: ServerResponse) => void): Promise<{ url: string; close(): void }> {
    const server = createServer((_req, res) => answer(res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
      close: () => server.close(),
    };
  }

  test('a closed port: one line naming the URL and what was expected, exit 4, no harness', async () => {
    const closed = { url: await closedUrl() };
    const { r, started, captured } = await probed(closed.url, ['--backend-timeout', '1']);
    assert.equal(r.exitCode, 4, String(r.stderr));
    const error = String(r.stderr)
      .split('\n')
      .filter((l) => l.startsWith('polar: error:'));
    assert.equal(error.length, 1, String(r.stderr));
    assert.match(
      error[0]!,
      new RegExp(`nothing listens at ${closed.url.replace(/\/v1$/, '')} \\(connection refused\\)`),
    );
    assert.equal(started, false, 'the harness never started');
    assert.equal(captured, false, 'no capture file for a run that never started');
  });

  test('an HTML page where the API should be: exit 4, names the URL and that JSON was expected', async () => {
    const html = await httpServer((res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!DOCTYPE html>\n<html><head><title>Jupyter</title></head></html>');
    });
    try {
      const { r, started } = await probed(html.url, ['--backend-timeout', '5']);
      assert.equal(r.exitCode, 4, String(r.stderr));
      assert.match(String(r.stderr), new RegExp(`polar: error: .*${html.url}/models: .*HTML page.*JSON`));
      assert.equal(started, false);
    } finally {
      html.close();
    }
  });

  test('vLLM without tool calling: the message names the server flags to add', async () => {
    const standin = await startStandin({ toolParser: false });
    try {
      const { r, started } = await probed(standin.url);
      assert.equal(r.exitCode, 4, String(r.stderr));
      assert.match(
        String(r.stderr),
        /polar: error: vllm server at .*tool_calling: requests with tools are refused/,
      );
      assert.match(String(r.stderr), /--enable-auto-tool-choice --tool-call-parser/);
      assert.equal(started, false);
      // --skip-backend-check: the user's call, the harness runs
      const skipped = await probed(standin.url, ['--skip-backend-check']);
      assert.equal(skipped.r.exitCode, 0, String(skipped.r.stderr));
      assert.equal(skipped.started, true);
    } finally {
      await standin.close();
    }
  });

  test('a good set-up: the probe passes and the harness runs', async () => {
    const standin = await startStandin();
    try {
      const { r, started } = await probed(standin.url);
      assert.equal(r.exitCode, 0, String(r.stderr));
      assert.equal(started, true);
      assert.ok(standin.calls.length >= 1, 'the probe asked the server for a token');
    } finally {
      await standin.close();
    }
  });
});
