/** Private run dirs: made with an owner file; a dead owner's dir is swept, a live or foreign one kept. */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import { makeRunDir, removeStaleRunDirs } from '../../../src/harnesses/rundir.ts';
import { tempDir } from '../../support/temp.ts';

test('makeRunDir names its owner; removeStaleRunDirs removes only dirs of dead owners', async () => {
  const base = tempDir('polar-rundir-');
  const mine = await makeRunDir(base);
  assert.equal(JSON.parse(await readFile(join(mine, 'polar-owner.json'), 'utf8')).pid, process.pid);
  const deadPid = Number((await execa(process.execPath, ['-e', 'console.log(process.pid)'])).stdout);
  const stale = join(base, 'polar-run-dead');
  await mkdir(join(stale, 'codex-home'), { recursive: true });
  await writeFile(join(stale, 'polar-owner.json'), JSON.stringify({ pid: deadPid }));
  const foreign = join(base, 'polar-run-foreign');
  await mkdir(foreign);
  const other = join(base, 'something-else');
  await mkdir(other);
  assert.deepEqual(await removeStaleRunDirs(base), [stale]);
  assert.ok(existsSync(mine) && existsSync(foreign) && existsSync(other) && !existsSync(stale));
  assert.deepEqual(await removeStaleRunDirs(join(base, 'missing')), []);
});
