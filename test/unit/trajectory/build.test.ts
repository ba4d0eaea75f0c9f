/**
 * The streaming pipeline: rewards and groups (advantages are polar train's), formats, bad input, irregular
 * streams.
 */
import assert from 'node:assert/strict';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { InputError } from '../../../src/errors.ts';
import { buildTrajectories } from '../../../src/trajectory/build.ts';
import { validateTrajectory } from '../../../src/trajectory/reader.ts';
import { tempDir } from '../../support/temp.ts';
import { buildFrom, call, EOT, grading, ids, jsonl, session, sessionEnd } from './builder.ts';

const SYS = ids(1, 6);

/** A one-call session with its end and (optionally) grading. */
function oneCall(id: string, task: string, sample: number, reward?: number): unknown[] {
  const r: unknown[] = [
    session(id, { task_id: task, sample }),
    call(id, { prompt: SYS, completion: [100 + sample, EOT] }),
    sessionEnd(id),
  ];
  if (reward !== undefined) r.push(grading(id, reward, { task_id: task, sample }));
  return r;
}

function collect(): { stream: Writable; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _e, cb) {
      chunks.push(String(chunk));
      cb();
    },
  });
  return {
    stream,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l)),
  };
}

describe('polar build pipeline', () => {
  it('writes records that validate against trajectory record v2, with no advantage (polar train computes it)', async () => {
    const { out } = await buildFrom([...oneCall('a', 't', 0, 1), ...oneCall('b', 't', 1, 0)]);
    assert.equal(out.length, 2);
    for (const [i, rec] of out.entries()) validateTrajectory('out', i + 1, rec);
    for (const rec of out) {
      assert.equal(rec.v, 2);
      assert.equal('advantage' in rec, false);
    }
  });

  it('takes rewards from grading records, including one that follows session_end, and groups by task', async () => {
    const { out, stats } = await buildFrom([
      ...oneCall('a', 't', 0, 1),
      ...oneCall('b', 't', 1, 0),
      ...oneCall('c', 't', 2, 0),
      ...oneCall('d', 't', 3, 1),
    ]);
    assert.deepEqual(
      out.map((o) => o.reward),
      [1, 0, 0, 1],
    );
    for (const o of out) assert.equal(o.group_id, 't');
    assert.equal(stats.rewards.capture, 4);
    assert.equal(stats.groups, 1);
  });

  it('applies a grading record that arrives in a later input file', async () => {
    const dir = tempDir('polar-build-late-');
    try {
      await writeFile(join(dir, 'a.jsonl'), jsonl(oneCall('a', 't', 0)));
      await writeFile(join(dir, 'b.jsonl'), jsonl([grading('a', 0.5)]));
      const c = collect();
      const stats = await buildTrajectories({ inputs: [dir], output: c.stream });
      assert.equal(stats.inputs, 2);
      assert.equal(c.lines()[0]!.reward, 0.5);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reads --rewards by session or by task_id + sample; capture grading wins, conflicts counted', async () => {
    const dir = tempDir('polar-build-rw-');
    try {
      const rewards = join(dir, 'rewards.jsonl');
      await writeFile(
        rewards,
        jsonl([
          { session: 'a', reward: 1 },
          { task_id: 't', sample: 1, reward: 0.25 },
          { session: 'c', reward: 0 },
        ]),
      );
      const { out, stats } = await buildFrom(
        [
          ...oneCall('a', 't', 0),
          ...oneCall('b', 't', 1),
          ...oneCall('c', 't', 2, 1),
          ...oneCall('d', 't', 3),
        ],
        { rewards },
      );
      assert.deepEqual(
        out.map((o) => o.reward),
        [1, 0.25, 1, null],
      );
      assert.deepEqual(stats.rewards, { capture: 1, file: 2, missing: 1 });
      assert.equal(stats.notes['reward conflict (capture kept)'], 1);
      assert.equal(stats.groups_without_reward, 1);

      await writeFile(rewards, '{"reward": 1}\n');
      await assert.rejects(buildFrom(oneCall('a', 't', 0), { rewards }), (e: InputError) => {
        assert.ok(e instanceof InputError);
        assert.equal(e.line, 1);
        assert.equal(e.field, 'session');
        return true;
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('counts uniform and single groups; --drop-uniform-groups drops and counts uniform groups', async () => {
    const records = [
      ...oneCall('a', 't1', 0, 1),
      ...oneCall('b', 't1', 1, 0),
      ...oneCall('c', 't1', 2, 0),
      ...oneCall('d', 't2', 0, 1),
      ...oneCall('e', 't2', 1, 1),
      ...oneCall('f', 't3', 0, 1),
    ];
    const kept = await buildFrom(records);
    assert.equal(kept.stats.groups, 3);
    assert.equal(kept.stats.groups_uniform, 2, 't2 (1, 1) and t3 (a group of one)');
    assert.equal(kept.stats.groups_single, 1);

    const dropped = await buildFrom(records, { dropUniformGroups: true });
    assert.deepEqual(
      dropped.out.map((o) => o.session),
      ['a', 'b', 'c'],
    );
    assert.equal(dropped.stats.groups_dropped_uniform, 2);
    assert.equal(dropped.stats.sessions_skipped['group with uniform rewards (--drop-uniform-groups)'], 3);
    assert.equal(dropped.stats.trajectories_written, 3);
  });

  it('groups by a meta key with --group-by meta:KEY', async () => {
    const { out } = await buildFrom(
      [
        session('a', { meta: { prompt_id: 'p1' } }),
        call('a', { prompt: SYS, completion: [1] }),
        sessionEnd('a'),
        grading('a', 1),
        session('b', { meta: { prompt_id: 'p1' } }),
        call('b', { prompt: SYS, completion: [2] }),
        sessionEnd('b'),
        grading('b', 0),
      ],
      { groupBy: 'meta:prompt_id' },
    );
    assert.deepEqual(
      out.map((o) => [o.group_id, o.reward]),
      [
        ['p1', 1],
        ['p1', 0],
      ],
    );
  });

  it('writes verl rows: one per trace, input_ids = prompt + response, masks and logprobs over input_ids', async () => {
    const sub = ids(700, 3);
    const { out } = await buildFrom(
      [
        session('s'),
        call('s', { prompt: SYS, completion: [100, EOT] }),
        call('s', { prompt: sub, completion: [200] }),
        call('s', { prompt: [...SYS, 100, EOT, 300], completion: [101] }),
        sessionEnd('s'),
        grading('s', 1),
      ],
      { format: 'verl' },
    );
    assert.equal(out.length, 2);
    const [root, subRow] = out as Record<string, unknown>[];
    assert.equal(root!.id, 's#0');
    assert.equal(subRow!.id, 's#1');
    assert.equal(root!.uid, 'task-1');
    assert.equal(root!.prompt_length, SYS.length);
    assert.deepEqual(root!.input_ids, [...SYS, 100, EOT, 300, 101]);
    assert.deepEqual(root!.loss_mask, [0, 0, 0, 0, 0, 0, 1, 1, 0, 1]);
    assert.deepEqual(root!.logprobs, [0, 0, 0, 0, 0, 0, -0.1, -0.2, 0, -0.1]);
    assert.equal(subRow!.kind, 'subagent');
    assert.equal(root!.reward, subRow!.reward);
    assert.equal(root!.trajectory_id, subRow!.trajectory_id);
    assert.equal('advantage' in root!, false, "verl's trainer computes its advantages from uid and reward");
  });

  it('fails on a malformed line with file:line, and on a schema-invalid line naming the field', async () => {
    const good = jsonl(oneCall('a', 't', 0));
    await assert.rejects(buildFrom(`${good}{not json\n`), (e: InputError) => {
      assert.ok(e instanceof InputError);
      assert.equal(e.line, 4);
      assert.match(e.message, /capture\.jsonl:4: not valid JSON/);
      return true;
    });
    const bad = call('a', { prompt: SYS, completion: [1, 2] }) as Record<string, unknown>;
    bad.prompt_token_ids = [1, 2, -3];
    await assert.rejects(buildFrom([session('a'), bad, sessionEnd('a')]), (e: InputError) => {
      assert.equal(e.line, 2);
      assert.equal(e.field, 'prompt_token_ids[2]');
      return true;
    });
    const noSeq = call('a', { prompt: SYS, completion: [1] }) as Record<string, unknown>;
    delete noSeq.seq;
    await assert.rejects(
      buildFrom([session('a'), noSeq]),
      (e: InputError) => e.field === 'seq' && e.line === 2,
    );
    const mismatch = call('a', { prompt: SYS, completion: [1, 2], logprobs: [-1] });
    await assert.rejects(
      buildFrom([session('a'), mismatch]),
      (e: InputError) => e.field === 'completion_logprobs' && e.line === 2,
    );
  });

  it('--skip-invalid skips and counts bad lines and builds the rest', async () => {
    const bad = call('a', { prompt: SYS, completion: [1] }) as Record<string, unknown>;
    bad.type = 'nonsense';
    const seen: InputError[] = [];
    const text = `${jsonl([session('a'), bad])}{oops\n${jsonl([call('a', { prompt: SYS, completion: [1] }), sessionEnd('a')])}`;
    const { out, stats } = await buildFrom(text, { skipInvalid: true, onInvalid: (e) => seen.push(e) });
    assert.equal(out.length, 1);
    assert.deepEqual(stats.lines_skipped, { 'schema-invalid': 1, 'invalid JSON': 1 });
    assert.deepEqual(
      seen.map((e) => e.line),
      [2, 3],
    );
  });

  it('handles duplicate call ids, unknown sessions, out-of-order seq and a missing session_end', async () => {
    const c1 = call('a', { id: 'one', seq: 0, prompt: SYS, completion: [100, EOT] });
    const c2 = call('a', { id: 'two', seq: 1, prompt: [...SYS, 100, EOT, 300], completion: [101] });
    const { out, stats } = await buildFrom([
      session('a'),
      c2, // arrives first
      c1,
      c1, // duplicate
      call('ghost', { prompt: SYS, completion: [1] }),
      // no session_end: a killed run
    ]);
    assert.equal(out.length, 1);
    const o = out[0] as { status: string; traces: { calls: string[] }[] };
    assert.deepEqual(o.traces[0]!.calls, ['one', 'two']);
    assert.equal(o.status, 'error');
    assert.equal(stats.calls_skipped['duplicate call id'], 1);
    assert.equal(stats.calls_skipped['unknown session'], 1);
    assert.equal(stats.notes['out-of-order seq (sorted)'], 1);
    assert.equal(stats.notes['no session_end (status error)'], 1);
  });

  it('separates interleaved sessions of one stream (stdin) and maps end statuses', async () => {
    const records = [
      session('a', { sample: 0 }),
      session('b', { sample: 1 }),
      call('a', { prompt: SYS, completion: [1] }),
      call('b', { prompt: SYS, completion: [2] }),
      call('a', { prompt: [...SYS, 1, 50], completion: [3] }),
      sessionEnd('b', 'timeout'),
      sessionEnd('a', 'interrupted'),
      grading('a', 1),
      grading('b', 0),
    ];
    const c = collect();
    const stats = await buildTrajectories({
      inputs: ['-'],
      stdin: Readable.from([jsonl(records)]),
      output: c.stream,
    });
    const lines = c.lines() as { session: string; status: string; traces: { response_ids: number[] }[] }[];
    assert.deepEqual(
      lines.map((l) => [l.session, l.status]),
      [
        ['b', 'timeout'],
        ['a', 'error'],
      ],
    );
    assert.deepEqual(lines[1]!.traces[0]!.response_ids, [1, 50, 3]);
    assert.equal(stats.notes['interrupted session (status error)'], 1);
  });

  it('with no output computes the report only', async () => {
    const stats = await buildTrajectories({
      inputs: [await tempCapture(oneCall('a', 't', 0, 1))],
      output: null,
    });
    assert.equal(stats.trajectories_written, 1);
    assert.equal(stats.tokens_trainable, 2);
    assert.equal(stats.tokens_total, SYS.length + 2);
  });

  it('keeps no state between builds in one process: each gives what it gives alone', async () => {
    // a file found by scanning a directory is skipped when it is not a capture file; the same file
    // named by the user in a later build is capture input (and fails on its first line), as it does
    // when that build runs alone. A module-level set once carried the first build's scan into the next.
    const dir = tempDir('polar-build-twice-');
    try {
      await writeFile(join(dir, 'capture.jsonl'), jsonl(oneCall('a', 't', 0, 1)));
      const results = join(dir, 'results.jsonl');
      await writeFile(results, `${JSON.stringify({ instance_id: 't', resolved: true })}\n`);
      const scan = async (): Promise<{ stats: unknown; lines: Record<string, unknown>[] }> => {
        const out = collect();
        const stats = await buildTrajectories({ inputs: [dir], output: out.stream });
        return { stats, lines: out.lines() };
      };
      const first = await scan();
      assert.deepEqual((first.stats as { files_skipped: unknown }).files_skipped, {
        'not a capture file (found in a directory)': 1,
      });
      assert.equal(first.lines.length, 1);
      await assert.rejects(
        buildTrajectories({ inputs: [results], output: null }),
        (e: unknown) => e instanceof InputError && e.message.includes('results.jsonl'),
      );
      assert.deepEqual(await scan(), first);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('names a missing input', async () => {
    await assert.rejects(
      buildTrajectories({ inputs: ['/nonexistent/x.jsonl'], output: null }),
      (e: InputError) => e instanceof InputError && /no such file/.test(e.message),
    );
  });
});

async function tempCapture(records: unknown[]): Promise<string> {
  const dir = tempDir('polar-build-one-');
  await mkdir(dir, { recursive: true });
  const file = join(dir, 'c.jsonl');
  await writeFile(file, jsonl(records));
  return file;
}
