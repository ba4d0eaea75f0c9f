/**
 * Issue 43, item 4: polar's temporary folders name their owner (pid, start time, where the pid means
 * something); a polar killed with SIGKILL leaves none behind for long. The reaper removes the folders
 * polar named to it; the next polar making one in the same parent removes those whose owner is gone,
 * and never one of a live process (a reused pid is not the owner; another pid namespace's is kept).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import {
  hostKey,
  ownedTempDir,
  ownerStamp,
  processStart,
  removeOrphanedTempDirs,
} from '../../../src/util/owned-temp.ts';
import { ROOT } from '../../support/cli.ts';
import { endsWithin } from '../../support/processes.ts';
import { tempDir } from '../../support/temp.ts';

const sleepers: number[] = [];
after(() => {
  for (const pid of sleepers) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
});

/** A process that runs until the test ends, and its start time. */
function liveProcess(): { pid: number; start: string } {
  const child = spawn('sleep', ['600'], { stdio: 'ignore' });
  sleepers.push(child.pid!);
  return { pid: child.pid!, start: processStart(child.pid!)! };
}

/** A pid no process has (one that ran and ended). */
async function deadPid(): Promise<number> {
  const child = spawn('true', { stdio: 'ignore' });
  await new Promise((r) => child.once('exit', r));
  return child.pid!;
}

test('a folder is named for its owner: this process, its start time, where its pid means something', async () => {
  const parent = tempDir('polar-owned-');
  const dir = await ownedTempDir(parent, 'sandbox');
  assert.match(dir, /\/polar-sandbox-[0-9a-f]{8}\.\d+\.\d+-[A-Za-z0-9]{6}$/);
  assert.ok(dir.includes(`polar-sandbox-${ownerStamp()}-`));
  assert.equal(ownerStamp(), `${hostKey()}.${process.pid}.${processStart('self')}`);
});

test("the next polar removes the folders of polars that are gone, never a live one's", async () => {
  const parent = tempDir('polar-owned-');
  const live = liveProcess();
  const name = (host: string, pid: number, start: string, kind = 'sandbox') =>
    join(parent, `polar-${kind}-${host}.${pid}.${start}-abcDEF`);
  const dead = await deadPid();
  const folders = {
    deadOwner: name(hostKey(), dead, '12345', 'history'),
    reusedPid: name(hostKey(), live.pid, `${Number(live.start) + 1}`),
    liveOwner: name(hostKey(), live.pid, live.start),
    thisProcess: name(hostKey(), process.pid, processStart('self')!, 'eval'),
    otherNamespace: name('00000000', dead, '12345'),
    unstamped: join(parent, 'polar-sandbox-abcDEF'),
    notPolar: join(parent, 'other-thing'),
  };
  for (const dir of Object.values(folders)) mkdirSync(join(dir, 'repo'), { recursive: true });
  // an agent's unwritable folder inside a dead owner's
  writeFileSync(join(folders.deadOwner, 'repo', 'f'), 'x');
  chmodSync(join(folders.deadOwner, 'repo'), 0o500);
  const removed = await removeOrphanedTempDirs(parent);
  assert.deepEqual(removed.sort(), [folders.deadOwner, folders.reusedPid].sort());
  for (const [what, dir] of Object.entries(folders))
    assert.equal(existsSync(dir), what !== 'deadOwner' && what !== 'reusedPid', what);
});

test('a polar killed with SIGKILL mid-sample: its reaper removes its folders; where the reaper died too, the next polar does', async () => {
  const parent = tempDir('polar-owned-');
  const out = join(parent, 'made.json');
  const src = (p: string) => JSON.stringify(pathToFileURL(join(ROOT, p)).href);
  // a polar stand-in: a sandbox root and a local environment's root (reaped), a spool (only named), and a
  // grading command that runs for 5 minutes; killed mid-command (the history repositories are in polar's
  // cache since issue 46, not in temporary folders)
  // (the record is written beside and renamed in: a reader that sees the file sees it whole)
  const script = `import { renameSync, writeFileSync } from 'node:fs';
import { makeTempDir } from ${src('src/rollout/temp-dirs.ts')};
import { ownedTempDir } from ${src('src/util/owned-temp.ts')};
import { execTree } from ${src('src/rollout/exec.ts')};
const parent = ${JSON.stringify(parent)};
const sandbox = await makeTempDir(parent, 'sandbox');
writeFileSync(sandbox + '/test_patch.diff', 'the hidden tests');
const local = await makeTempDir(parent, 'eval');
const spool = await ownedTempDir(parent, 'build');
const run = execTree('sleep', ['300'], { timeoutMs: 600000 });
writeFileSync(${JSON.stringify(`${out}.part`)}, JSON.stringify({ reaped: [sandbox, local], spool }));
renameSync(${JSON.stringify(`${out}.part`)}, ${JSON.stringify(out)});
await run;`;
  const polar = () =>
    spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
      stdio: 'ignore',
    });
  const made = async (): Promise<{ reaped: string[]; spool: string }> => {
    for (let i = 0; i < 1500 && !existsSync(out); i++) await new Promise((r) => setTimeout(r, 20));
    return JSON.parse(readFileSync(out, 'utf8'));
  };
  const first = polar();
  const one = await made();
  for (const dir of [...one.reaped, one.spool]) assert.ok(existsSync(dir), dir);
  first.kill('SIGKILL');
  for (let i = 0; i < 500 && one.reaped.some(existsSync); i++) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(one.reaped.filter(existsSync), [], 'the reaper removed the sandbox and local folders');
  assert.ok(await endsWithin(first.pid!, 5_000));
  // the spool is named, not reaped (as any folder is when its polar's reaper died with it): the next
  // polar's first folder in that parent removes it
  assert.ok(existsSync(one.spool));
  const next = await ownedTempDir(parent, 'probe');
  assert.ok(existsSync(next));
  assert.equal(existsSync(one.spool), false, 'the next polar removed the dead polar’s spool');
});
