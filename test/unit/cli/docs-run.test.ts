/**
 * Documented command lines run as written (issue 47 item 6), where they need no model, harness or Python:
 * the blocks of docs/*.md marked `<!-- run by test/unit/cli/docs-run.test.ts -->` (test/support/doc-blocks.ts),
 * each line given to bash in a folder holding the files the lines name, with `polar` on PATH as this
 * clone's bin/polar (what `npm link` makes). A line that exits non-zero, or writes nothing where it says
 * it writes, fails with the document and the line.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import { readTrajectories } from '../../../src/trajectory/reader.ts';
import { ROOT } from '../../support/cli.ts';
import { runnableBlocks } from '../../support/doc-blocks.ts';
import { tempDir } from '../../support/temp.ts';
import { call, EOT, grading, ids, jsonl, session, sessionEnd } from '../trajectory/builder.ts';

const work = tempDir('polar-docs-run-');
const bin = join(work, 'bin');
mkdirSync(bin);
writeFileSync(
  join(bin, 'polar'),
  `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, 'bin/polar')}" "$@"\n`,
);
chmodSync(join(bin, 'polar'), 0o755);

const SYS = ids(1, 6);
/** one session's capture: two calls, graded when `reward` is given */
const capture = (id: string, sample: number, reward?: number): unknown[] => [
  session(id, { sample }),
  call(id, { prompt: SYS, completion: [100, EOT] }),
  call(id, { prompt: [...SYS, 100, EOT, 300], completion: [101 + sample, EOT] }),
  sessionEnd(id),
  ...(reward === undefined ? [] : [grading(id, reward, { sample })]),
];

/** Runs one documented line in `cwd` with bash, `polar` on PATH; its stdout. */
async function run(line: string, cwd: string): Promise<string> {
  const r = await execa('bash', ['-euo', 'pipefail', '-c', line], {
    cwd,
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, NO_COLOR: '1' },
    reject: false,
    stdin: 'ignore',
  });
  assert.equal(r.exitCode, 0, `${line}\n${r.stderr}`);
  return r.stdout;
}

test('docs/trajectory-format.md: the three ways to call polar build, as written', async () => {
  const [lines] = runnableBlocks('docs/trajectory-format.md', import.meta.url);
  assert.equal(lines?.length, 3);
  const dir = join(work, 'trajectory-format');
  mkdirSync(join(dir, 'runs'), { recursive: true });
  writeFileSync(join(dir, 'run1.jsonl'), jsonl(capture('a', 0, 1)));
  // runs/: ungraded captures, their rewards in rewards.jsonl (the second line's --rewards)
  writeFileSync(join(dir, 'runs', 'b.jsonl'), jsonl(capture('b', 1)));
  writeFileSync(join(dir, 'runs', 'c.jsonl'), jsonl(capture('c', 2)));
  writeFileSync(join(dir, 'rewards.jsonl'), '{"session": "b", "reward": 1}\n{"session": "c", "reward": 0}\n');
  const rewards = async () => {
    const out: Array<[string, number | null]> = [];
    for await (const { record } of readTrajectories(join(dir, 'traj.jsonl')))
      out.push([record.session, record.reward]);
    return out.sort();
  };
  await run(lines![0]!, dir);
  assert.deepEqual(await rewards(), [
    ['a', 1],
    ['b', null],
    ['c', null],
  ]);
  await run(lines![1]!, dir);
  assert.deepEqual(await rewards(), [
    ['b', 1],
    ['c', 0],
  ]);
  assert.match(await run(lines![2]!, dir), /^polar build: 2 sessions, 4 calls -> 2 trajectories/);
});
