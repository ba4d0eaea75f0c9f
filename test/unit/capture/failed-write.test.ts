/**
 * Issue 22, item 1: after one failed write a v2 capture stays readable. The delta encoder used to
 * register a call as a base before its record was on disk, so when the write failed (disk full, a
 * file-size limit) the next records were deltas against a call the file does not hold, and `polar build`
 * stopped at `delta.base: call ... is not an earlier call of this session in this file`. Reproduced here
 * as in the issue, through the real `polar capture` against the vLLM stand-in: a small call, a 150 KB call
 * whose write fails, then two more small calls (independent prompts sharing the chat template's first
 * ids, so they are deltas against the newest call they share ids with). ENOSPC on a nearly full 256 KiB
 * tmpfs (a private mount namespace, `unshare -m`; skipped where that is not allowed) and EFBIG under
 * `ulimit -f`. Every record after the failure reads back, and session_end names the lost call.
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { buildTrajectories } from '../../../src/trajectory/build.ts';
import {
  captureArgs,
  privateDirs,
  privateEnv,
  readRecords,
  scriptHarness,
} from '../../support/capture-run.ts';
import { POLAR, ROOT, runPolar } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';

const dir = tempDir('polar-failed-write-');
after(() => rmSync(dir, { recursive: true, force: true }));

/** Four calls; the second is 150 KB. argv[1], when given, is a filler file removed after that call. */
const HARNESS = scriptHarness(`
  import { rmSync } from 'node:fs';
  const call = async (content) => {
    const r = await chat(content);
    if (r.status !== 200) throw new Error('status ' + r.status);
    await r.json();
  };
  await call('hello, ten');
  // 150 KB of words: one 150,000-letter word would cost the stand-in's tokenizer seconds of BPE
  await call('hello world '.repeat(12500));
  await new Promise((r) => setTimeout(r, 300));
  if (process.argv[1]) rmSync(process.argv[1]);
  await call('ten bytes');
  await call('ten more b');
  console.log('harness done');`);

const args = (standin: Standin, out: string) =>
  captureArgs(out, standin.url, HARNESS, ['--skip-backend-check']);

const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** What every variant must leave: the calls after the failed one read back, and the loss is named. */
async function checkCapture(out: string, result: { exitCode?: number; stdout: string; stderr: string }) {
  assert.equal(result.exitCode, 4, `exit ${result.exitCode}\n${result.stderr}`);
  assert.match(result.stdout, /harness done/);
  assert.match(result.stderr, /could not write to the capture .*(ENOSPC|EFBIG)/);
  const lines = readFileSync(out, 'utf8').trim().split('\n');
  const records = await readRecords(out); // strict: no line skipped
  const calls = records.filter((r) => r.type === 'call');
  assert.deepEqual(
    calls.map((c) => c.seq),
    [0, 2, 3],
    'the failed call keeps its number: the gap shows where it was',
  );
  // the calls after the failure are deltas, against calls that are in the file
  const written = new Set(calls.map((c) => c.id));
  const deltas = lines
    .map((l) => JSON.parse(l) as { delta?: { base: string } })
    .filter((l) => l.delta !== undefined);
  assert.ok(deltas.length >= 1, 'the later calls are written as deltas');
  for (const d of deltas) assert.ok(written.has(d.delta!.base), `base ${d.delta!.base} is in the file`);
  const end = records.at(-1)!;
  assert.equal(end.type, 'session_end');
  if (end.type !== 'session_end') return;
  assert.equal(end.calls, 3, 'session_end.calls counts the records in the file');
  assert.equal(end.lost_calls, 1, 'and names the one that is not');
  // polar build reads it all, and says a call was lost
  const sink = new Writable({ write: (_c, _e, cb) => cb() });
  const stats = await buildTrajectories({ inputs: [out], output: sink });
  assert.equal(stats.calls, 3);
  assert.equal(stats.calls_skipped['lost at capture (a failed write)'], 1);
  // and the message names the cause once ("ENOSPC: no space left", not "ENOSPC: ENOSPC: ...")
  assert.doesNotMatch(result.stderr, /(ENOSPC|EFBIG): \1/);
}

describe('a failed capture write loses that call only', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin();
  });
  after(() => standin.close());

  it('EFBIG: a file-size limit (ulimit -f 64) the 150 KB record is over', async () => {
    const { home, workdir, out } = await privateDirs();
    const r = await runPolar(args(standin, out), {
      cwd: workdir,
      env: privateEnv(home),
      extendEnv: false,
      timeoutMs: 120_000,
      fileSizeLimitKiB: 64,
    });
    await checkCapture(out, r);
  });

  it('ENOSPC: a nearly full 256 KiB tmpfs, space freed after the failed write', async (t) => {
    const probe = await execa('unshare', ['-m', 'true'], { reject: false });
    if (probe.exitCode !== 0) return t.skip('unshare -m is not allowed here (needs root)');
    const { home, workdir } = await privateDirs();
    const out = join(dir, 'enospc.jsonl');
    // a private mount namespace: the tmpfs goes away with the shell; the capture is copied out first
    const script = [
      'set -u',
      'fs=$(mktemp -d)',
      'mount -t tmpfs -o size=256k tmpfs "$fs"',
      'head -c 194560 /dev/zero > "$fs/filler"',
      `${[process.execPath, POLAR, ...args(standin, '"$fs/run.jsonl"')]
        .map((a) => (a === '"$fs/run.jsonl"' ? a : q(a)))
        .join(' ')} "$fs/filler"`,
      'rc=$?',
      `cp "$fs/run.jsonl" ${q(out)}`,
      'exit $rc',
    ].join('\n');
    const r = await execa('unshare', ['-m', 'bash', '-c', script], {
      reject: false,
      cwd: ROOT,
      env: { ...privateEnv(home), PWD: workdir },
      extendEnv: false,
      timeout: 120_000,
    });
    await checkCapture(out, { exitCode: r.exitCode, stdout: String(r.stdout), stderr: String(r.stderr) });
  });
});
