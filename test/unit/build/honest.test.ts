/**
 * `polar build` honesty (issue 18): a closed stdout ends quietly with 0; empty input and groups that
 * teach nothing are warned about; -o creates its folders; --json goes to stdout; --max-trace-tokens.
 */
import assert from 'node:assert/strict';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { polarInProcess, startPolar } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';
import { call, EOT, grading, ids, jsonl, session, sessionEnd } from '../trajectory/builder.ts';

/** The CLI's entry in this process (polarInProcess); node bin/polar with a reader that goes away. */
async function polar(args: string[], options: { closeAfterFirstChunk?: boolean } = {}) {
  if (!options.closeAfterFirstChunk) return polarInProcess(args);
  const child = startPolar(args);
  // the reader goes away, as `head` does after its first lines
  child.stdout?.once('data', () => child.stdout?.destroy());
  const r = await child;
  return { code: r.exitCode ?? null, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? '') };
}

const SYS = ids(1, 6);
const capture = (id: string, task: string, sample: number, reward: number): unknown[] => [
  session(id, { task_id: task, sample }),
  call(id, { prompt: SYS, completion: [100, EOT] }),
  call(id, { prompt: [...SYS, 100, EOT, 300], completion: [101 + sample, EOT] }),
  sessionEnd(id),
  grading(id, reward, { task_id: task, sample }),
];

describe('polar build (CLI): honest endings and warnings', () => {
  let dir = '';
  before(async () => {
    dir = tempDir('polar-build-honest-');
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a closed stdout (polar build | head) ends quietly with exit 0', async () => {
    const many: unknown[] = [];
    for (let i = 0; i < 1500; i++) many.push(...capture(`s${i}`, `t${i % 50}`, Math.floor(i / 50), i % 2));
    const file = join(dir, 'many.jsonl');
    await writeFile(file, jsonl(many));
    const r = await polar(['build', file, '-q'], { closeAfterFirstChunk: true });
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /error|EPIPE/);
  });

  it('empty input: an error (exit 3) that says what was found; --stats alone still reports (issue 31 item 12)', async () => {
    const empty = join(dir, 'empty.jsonl');
    await writeFile(empty, '');
    const emptyDir = join(dir, 'nothing');
    await mkdir(emptyDir);
    for (const input of [empty, emptyDir]) {
      const r = await polar(['build', input, '-q']);
      assert.equal(r.code, 3, r.stderr);
      assert.match(
        r.stderr,
        /polar: error: .*: no trajectory written: no sessions found: \d+ input files? read, 0 lines/,
      );
      const stats = await polar(['build', input, '--stats']);
      assert.equal(stats.code, 0, stats.stderr);
      assert.match(stats.stderr, /polar: warning: no sessions found/);
    }
  });

  it('a capture cut off before any call finished: exit 3 with the reason, an existing -o left as it was', async () => {
    const cut = join(dir, 'cut.jsonl');
    await writeFile(
      cut,
      jsonl([session('cut', { task_id: 't', sample: 0 }), sessionEnd('cut', 'interrupted')]),
    );
    const out = join(dir, 'kept-traj.jsonl');
    await writeFile(out, 'the previous trajectories\n');
    const r = await polar(['build', cut, '-o', out]);
    assert.equal(r.code, 3, r.stderr);
    assert.match(
      r.stderr,
      /polar: error: .*cut\.jsonl: no trajectory written: 1 session and 0 calls read, nothing to build from them: no call was recorded/,
    );
    assert.match(r.stderr, /skipped sessions: no calls 1/);
    assert.equal(await readFile(out, 'utf8'), 'the previous trajectories\n');
  });

  it('groups of one (--samples 1): warns that every advantage is 0', async () => {
    const single = join(dir, 'single');
    await mkdir(single);
    await writeFile(join(single, 'a.jsonl'), jsonl(capture('a', 'task-a', 0, 1)));
    await writeFile(join(single, 'b.jsonl'), jsonl(capture('b', 'task-b', 0, 0)));
    const r = await polar(['build', single, '-o', join(dir, 'single-traj.jsonl')]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /warning: every group is a single sample \(2 groups\): every advantage is 0/);
    const mixed = join(dir, 'mixed');
    await mkdir(mixed);
    await writeFile(join(mixed, 'a.jsonl'), jsonl(capture('a', 'task-a', 0, 1)));
    await writeFile(join(mixed, 'b.jsonl'), jsonl(capture('b', 'task-a', 1, 0)));
    const ok = await polar(['build', mixed, '-o', join(dir, 'mixed-traj.jsonl')]);
    assert.doesNotMatch(ok.stderr, /warning/);
  });

  it('-o creates its folders; --json goes to stdout; --max-trace-tokens (and its old name)', async () => {
    const input = join(dir, 'one.jsonl');
    await writeFile(input, jsonl([...capture('a', 't', 0, 1), ...capture('b', 't', 1, 0)]));
    const out = join(dir, 'no', 'such', 'dir', 'traj.jsonl');
    const r = await polar(['build', input, '-o', out, '--json', '--max-trace-tokens', '12']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).trajectories_written, 2);
    assert.equal((await readFile(out, 'utf8')).trim().split('\n').length, 2);
    const both = await polar(['build', input, '--json']);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--json prints the report on stdout, where the trajectories go without -o/);
    const old = await polar(['build', input, '--max-tokens', '12', '-q']);
    assert.equal(old.code, 0, old.stderr);
    assert.match(old.stderr, /warning: --max-tokens is now --max-trace-tokens/);
    const dirOut = await polar(['build', input, '-o', dir]);
    assert.equal(dirOut.code, 2);
    assert.match(dirOut.stderr, /--output .* is a directory, not a file/);
  });
});
