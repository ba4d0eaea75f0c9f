/**
 * `polar build` as a user runs it on temp files: stdout JSONL, stderr report, exit codes. The CLI's entry
 * runs in this process (polarInProcess); reading stdin (`-`) is node bin/polar itself.
 */
import assert from 'node:assert/strict';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { readTrajectories } from '../../../src/trajectory/reader.ts';
import { polarInProcess, runPolar } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';
import { call, EOT, grading, ids, jsonl, session, sessionEnd } from '../trajectory/builder.ts';

const polar = (args: string[], input?: string) =>
  input === undefined ? polarInProcess(args) : runPolar(args, { input });

const SYS = ids(1, 6);
const capture = (id: string, sample: number, reward: number): unknown[] => [
  session(id, { sample }),
  call(id, { prompt: SYS, completion: [100, EOT] }),
  call(id, { prompt: [...SYS, 100, EOT, 300], completion: [101 + sample, EOT] }),
  sessionEnd(id),
  grading(id, reward, { sample }),
];

describe('polar build (CLI)', () => {
  let dir = '';
  before(async () => {
    dir = tempDir('polar-build-cli-');
    await writeFile(join(dir, 'a.jsonl'), jsonl(capture('a', 0, 1)));
    await writeFile(join(dir, 'b.jsonl'), jsonl(capture('b', 1, 0)));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads files and directories, writes JSONL to stdout and the report to stderr', async () => {
    const r = await polar(['build', dir]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      lines.map((l) => [l.session, l.reward, l.group_id, l.v]),
      [
        ['a', 1, 'task-1', 2],
        ['b', 0, 'task-1', 2],
      ],
    );
    assert.match(r.stderr, /2 sessions, 4 calls -> 2 trajectories/);
    assert.match(
      r.stderr,
      /calls in traces\s+4 of 4 seen: 2 started a trace, 2 extended one \(prefix merging\)/,
    );
  });

  it('-o writes a file that readTrajectories accepts; stdin with - works; --stats --json prints only the report', async () => {
    const out = join(dir, 'traj.jsonl');
    const text =
      (await readFile(join(dir, 'a.jsonl'), 'utf8')) + (await readFile(join(dir, 'b.jsonl'), 'utf8'));
    const r = await polar(['build', '-', '-o', out, '-q'], text);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '');
    const read = [];
    for await (const t of readTrajectories(out)) read.push(t.record.session);
    assert.deepEqual(read, ['a', 'b']);

    const s = await polar(['build', join(dir, 'a.jsonl'), '--stats', '--json']);
    assert.equal(s.code, 0, s.stderr);
    const stats = JSON.parse(s.stdout);
    assert.equal(stats.trajectories_written, 1);
    assert.equal(stats.tokens_trainable, 4);
  });

  it("a bad line fails with exit code 3 and file:line; --skip-invalid counts it; a bad option exits 2 in polar's format", async () => {
    const bad = join(dir, 'bad.jsonl');
    const good = jsonl(capture('c', 0, 1)).split('\n');
    good.splice(2, 0, '{"v":1,"type":"call"');
    await writeFile(bad, good.join('\n'));
    const r = await polar(['build', bad]);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /bad\.jsonl:3: not valid JSON/);
    assert.equal(r.stdout, '');

    const s = await polar(['build', bad, '--skip-invalid']);
    assert.equal(s.code, 0, s.stderr);
    assert.match(s.stderr, /skipped lines\s+invalid JSON 1/);
    assert.equal(s.stdout.trim().split('\n').length, 1);

    const u = await polar(['build', bad, '--overlong', 'skip']);
    assert.equal(u.code, 2);
    assert.match(u.stderr, /polar: error: --overlong skip is not one of mask, penalty, keep/);
  });

  it('--format verl -o FILE.parquet writes Parquet (token lists as Parquet LISTs), the rows of -o FILE.jsonl; a polar-format .parquet is refused', async () => {
    const inputs = [join(dir, 'a.jsonl'), join(dir, 'b.jsonl')];
    const out = join(dir, 'verl');
    const jsonlOut = join(out, 'verl.jsonl');
    const parquetOut = join(out, 'verl.parquet');
    const j = await polar(['build', ...inputs, '--format', 'verl', '-o', jsonlOut]);
    assert.equal(j.code, 0, j.stderr);
    const r = await polar(['build', ...inputs, '--format', 'verl', '-o', parquetOut]);
    assert.equal(r.code, 0, r.stderr);
    const bytes = await readFile(parquetOut);
    // the file is Parquet (it was JSON lines under a .parquet name), and no partial file is left
    assert.equal(bytes.subarray(0, 4).toString(), 'PAR1');
    assert.equal(bytes.subarray(-4).toString(), 'PAR1');
    assert.deepEqual(
      (await readdir(dir)).filter((f) => f.includes('partial')),
      [],
    );
    const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
    const metadata = parquetMetadata(file);
    const lists = metadata.schema.filter((e) => e.converted_type === 'LIST').map((e) => e.name);
    assert.deepEqual(lists, ['input_ids', 'loss_mask', 'logprobs']);
    const rows = (await parquetReadObjects({ file })).map((row) =>
      Object.fromEntries(
        Object.entries(row).map(([k, v]) => [
          k,
          JSON.parse(JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? Number(x) : x))),
        ]),
      ),
    );
    const expected = (await readFile(jsonlOut, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(rows.length, 2);
    assert.deepEqual(rows, expected);
    const refused = await polar(['build', ...inputs, '-o', join(out, 'polar.parquet')]);
    assert.equal(refused.code, 2);
    assert.match(
      refused.stderr,
      /polar: error: -o .*polar\.parquet: polar trajectories are JSON lines, Parquet is for --format verl/,
    );
  });
});
