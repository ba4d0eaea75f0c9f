/**
 * `polar capture --json` (issue 47 item 6): after the harness's own output, one JSON line on stdout that a
 * script reads without parsing polar's stderr: the capture file, its session, the calls recorded (failed,
 * hung up, cut, lost) and how the harness ended. Real calls on 127.0.0.1 through the vLLM stand-in, one of
 * them failed by the server.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  captureArgs,
  privateDirs,
  privateEnv,
  readRecords,
  scriptHarness,
} from '../../support/capture-run.ts';
import { runPolar } from '../../support/cli.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

describe('polar capture --json', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin();
  });
  after(() => standin.close());

  test("the summary is the last line of stdout, after the harness's output; the exit code is the harness's", async () => {
    const { home, workdir, out } = await privateDirs();
    standin.faults.push({ status: 500, message: 'injected' });
    const harness = scriptHarness(`
      for (let i = 0; i < 2; i++) console.log('harness got ' + (await chat('hi')).status);
      process.exit(3);`);
    const r = await runPolar(captureArgs(out, standin.url, harness, ['--skip-backend-check', '--json']), {
      cwd: workdir,
      env: privateEnv(home),
      extendEnv: false,
      timeoutMs: 60_000,
    });
    assert.equal(r.code, 3, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.deepEqual(lines.slice(0, -1), ['harness got 502', 'harness got 200']);
    const summary = JSON.parse(lines.at(-1) ?? '');
    const records = await readRecords(out);
    const session = records.find((rec) => rec.type === 'session') as { id?: string } | undefined;
    assert.deepEqual(summary, {
      output: out,
      session_id: session?.id,
      calls: 2,
      errors: 1,
      client_closed: 0,
      cut: 0,
      lost: 0,
      harness: { status: 'error', exit_code: 3, signal: null },
    });
    // without --json stdout is the harness's alone
    const plain = await runPolar(captureArgs(`${out}.2`, standin.url, harness, ['--skip-backend-check']), {
      cwd: workdir,
      env: privateEnv(home),
      extendEnv: false,
      timeoutMs: 60_000,
    });
    assert.deepEqual(plain.stdout.trim().split('\n'), ['harness got 200', 'harness got 200']);
  });
});
