/**
 * The capture writer under failure and its file modes (issue 17, items 9 and 10): a write that fails
 * (here: a file-size limit, `ulimit -f`, in a subshell) is cut back to the last whole record, polar is
 * not killed by SIGXFSZ, the capture stays valid JSONL, and `polar capture` exits with a clear message.
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { CaptureWriter } from '../../../src/capture/writer.ts';
import {
  captureArgs,
  privateDirs,
  privateEnv,
  readRecords,
  scriptHarness,
} from '../../support/capture-run.ts';
import { fileSizeLimited, ROOT, runPolar } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

const dir = tempDir('polar-writer-');
after(() => rmSync(dir, { recursive: true, force: true }));

/** Runs a command with a file-size limit of `blocks` KiB (SIGXFSZ left at its default). */
function limited(blocks: number, command: string[]) {
  const [file, ...args] = fileSizeLimited(blocks, command);
  return execa(file!, args, { reject: false, cwd: ROOT, timeout: 60_000 });
}

describe('capture writer', () => {
  it('creates captures 0600 in folders 0700', () => {
    const path = join(dir, 'new', 'deeper', 'c.jsonl');
    const writer = new CaptureWriter(path);
    writer.write({ v: 1, type: 'grading', session: 's' });
    writer.close();
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.equal(statSync(join(dir, 'new')).mode & 0o777, 0o700);
    assert.equal(statSync(join(dir, 'new', 'deeper')).mode & 0o777, 0o700);
  });

  it('cuts a failed write back to the last whole record, and goes on (file-size limit, no SIGXFSZ death)', async () => {
    const path = join(dir, 'limited.jsonl');
    // 4 KiB limit: three 1000-byte records fit, a 2000-byte one fails half-written, a small one fits again
    const script = `
      import { CaptureWriter } from ${JSON.stringify(join(ROOT, 'src/capture/writer.ts'))};
      const w = new CaptureWriter(${JSON.stringify(path)});
      const line = (n, pad) => JSON.stringify({ v: 1, type: 'grading', session: 's' + n, pad: 'x'.repeat(pad) });
      const errors = [];
      for (const [n, pad] of [[1, 950], [2, 950], [3, 950], [4, 2000], [5, 300]]) {
        try { w.writeLine(line(n, pad)); } catch (e) { errors.push({ n, name: e.name, code: e.code, message: e.message, hint: e.hint }); }
      }
      w.close();
      console.log(JSON.stringify({ records: w.records, errors, failure: w.failure?.message ?? null }));`;
    const r = await limited(4, [process.execPath, '--import', 'tsx', '--input-type=module', '-e', script]);
    assert.equal(r.exitCode, 0, `killed or failed: ${r.signal ?? ''} ${r.stderr}`);
    const out = JSON.parse(String(r.stdout).trim().split('\n').at(-1)!) as {
      records: number;
      errors: Array<{ n: number; name: string; code: string; message: string; hint: string }>;
      failure: string;
    };
    assert.equal(out.records, 4);
    assert.equal(out.errors.length, 1);
    assert.equal(out.errors[0]!.n, 4);
    assert.equal(out.errors[0]!.name, 'CaptureWriteError');
    assert.match(out.errors[0]!.message, /EFBIG/);
    assert.match(out.errors[0]!.message, /cut back to its last whole record/);
    assert.match(out.errors[0]!.hint, /ulimit -f/);
    const text = readFileSync(path, 'utf8');
    assert.ok(text.endsWith('\n'));
    const sessions = text
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { session: string }).session);
    assert.deepEqual(sessions, ['s1', 's2', 's3', 's5']);
  });

  describe('polar capture under a file-size limit', () => {
    let standin: Standin;
    before(async () => {
      standin = await startStandin();
    });
    after(() => standin.close());

    it('exits with a clear message and leaves a valid capture', async () => {
      const { home, workdir, out } = await privateDirs();
      // six calls with unrelated 3 KB prompts: each record is whole (no delta), the third one overflows
      const harness = scriptHarness(`
        for (let i = 0; i < 6; i++) await (await chat(String(i).repeat(3000))).json();
        console.log('harness done');`);
      const r = await runPolar(captureArgs(out, standin.url, harness), {
        cwd: workdir,
        env: privateEnv(home),
        extendEnv: false,
        timeoutMs: 60_000,
        fileSizeLimitKiB: 64,
      });
      assert.equal(r.exitCode, 4, `exit ${r.exitCode} ${r.signal ?? ''}\n${r.stderr}`);
      assert.match(String(r.stdout), /harness done/);
      assert.match(
        String(r.stderr),
        /could not write to the capture .*EFBIG.*cut back to its last whole record/,
      );
      assert.match(String(r.stderr), /ulimit -f/);
      const text = readFileSync(out, 'utf8');
      assert.ok(text.endsWith('\n'), 'no partial record at the end');
      const got = await readRecords(out);
      const calls = got.filter((x) => x.type === 'call');
      assert.ok(calls.length >= 1 && calls.length < 6, `${calls.length} calls fit`);
      assert.equal(got[0]!.type, 'session');
      assert.equal(got.at(-1)!.type, 'session_end');
    });
  });
});
