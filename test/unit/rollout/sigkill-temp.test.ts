/**
 * Issue 43, item 4, with the real CLI: `polar eval --runtime sandbox` killed with SIGKILL mid-sample (its
 * grading command hangs) leaves its temporary folders (`polar-sandbox-*`, with the repository and the
 * test patch) only until its reaper removes them (the history repositories are in polar's cache since
 * issue 46, not in the temporary folder: none is made there). Killed together with its reaper,
 * they are there until the next polar run in the same temporary folder, which removes them, and keeps a
 * folder whose owner still runs. Every polar here runs with its own TMPDIR.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ensureFixtureRepos } from '../../../scripts/swe-fixtures.ts';
import { hostKey, processStart } from '../../../src/util/owned-temp.ts';
import { ROOT, runPolar, startPolar } from '../../support/cli.ts';
import { endsWithin } from '../../support/processes.ts';
import { tempDir } from '../../support/temp.ts';

const TASK = 'polar-fixtures__jsutil-5';
const work = tempDir('polar-sigkill-tmp-');
const tmp = join(work, 'tmp');
mkdirSync(tmp);

function row(testCmd?: string): string {
  const task = readFileSync(join(ROOT, 'fixtures/swe/mini.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((r) => r.instance_id === TASK)!;
  const path = join(work, `${testCmd ? 'hangs' : 'plain'}.jsonl`);
  writeFileSync(path, `${JSON.stringify(testCmd ? { ...task, test_cmd: testCmd } : task)}\n`);
  return path;
}

/** polar's temporary folders in the run's TMPDIR */
const leftovers = () =>
  readdirSync(tmp).filter((n) => /^polar-(sandbox|history|eval|probe|build|gym)-/.test(n));

async function until(what: string, ok: () => boolean, ms = 60_000): Promise<void> {
  for (let waited = 0; !ok(); waited += 50) {
    if (waited > ms) assert.fail(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** the pids of the processes started with this TMPDIR whose command line names `what` */
function processesOf(what: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
      if (cmdline.includes(what) && environ.split('\0').includes(`TMPDIR=${tmp}`)) out.push(pid);
    } catch {
      // gone
    }
  }
  return out;
}

const evalArgs = (dataset: string, out: string) => [
  'eval',
  '--dataset',
  dataset,
  '--agent',
  'gold',
  '--runtime',
  'sandbox',
  '--repos',
  join(ROOT, 'fixtures/swe/repos'),
  '--out',
  join(work, out),
];

/** starts a polar whose grading hangs, and waits until its sample's test command runs */
async function hangingPolar(out: string) {
  // (the test command marks its start in the sample's tree, then hangs; the test files polar appends
  // after it are a comment)
  const polar = startPolar(evalArgs(row('touch /testbed/.polar-started && sleep 600 #'), out), {
    env: { TMPDIR: tmp },
  });
  polar.catch(() => {});
  const started = () =>
    readdirSync(tmp).some(
      (n) => n.startsWith('polar-sandbox-') && existsSync(join(tmp, n, 'repo', '.polar-started')),
    );
  await until('the sample’s test command started', started);
  assert.ok(leftovers().some((n) => n.startsWith('polar-sandbox-')));
  assert.ok(!leftovers().some((n) => n.startsWith('polar-history-')), 'the history is in the cache');
  // (wrapped: an async function returning execa's child would wait for it to end)
  return { polar };
}

test('SIGKILL mid-sample: the reaper removes the sandbox folders', async () => {
  ensureFixtureRepos();
  const { polar } = await hangingPolar('one');
  polar.kill('SIGKILL');
  assert.ok(await endsWithin(polar.pid!, 10_000));
  await until('the reaper removed the folders', () => leftovers().length === 0, 30_000);
});

test('SIGKILL of polar and its reaper: the next polar run removes the folders, and keeps a live owner’s', async () => {
  const { polar } = await hangingPolar('two');
  const reapers = processesOf('reaper.mjs');
  assert.ok(reapers.length >= 1, 'polar runs a reaper');
  for (const pid of reapers) process.kill(pid, 'SIGKILL');
  polar.kill('SIGKILL');
  assert.ok(await endsWithin(polar.pid!, 10_000));
  await new Promise((r) => setTimeout(r, 1000));
  const left = leftovers();
  assert.ok(
    left.some((n) => n.startsWith('polar-sandbox-')),
    `left: ${left.join(' ')}`,
  );
  // a folder of a live polar (this test's process stands in for it) is never removed
  const live = join(tmp, `polar-sandbox-${hostKey()}.${process.pid}.${processStart('self')}-live00`);
  mkdirSync(live);
  const next = await runPolar(evalArgs(row(), 'three'), { env: { TMPDIR: tmp } });
  assert.equal(next.code, 0, next.stderr);
  assert.deepEqual(leftovers(), [live.split('/').pop()], 'only the live owner’s folder is left');
});
