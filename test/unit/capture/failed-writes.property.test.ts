/**
 * Issue 22, item 1, as a property: failed writes at random points of random v2 captures (a real
 * file-size limit in a child process: test/support/failed-writes-child.ts). Every record written after
 * a failure reads back; only the calls whose write failed are missing (and `polar capture` names them in
 * session_end.lost_calls: test/unit/capture/failed-write.test.ts).
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { execa } from 'execa';
import { ROOT } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';

const dir = tempDir('polar-failed-writes-');
after(() => rmSync(dir, { recursive: true, force: true }));

it('every record written after a failed write reads back (EFBIG at random calls)', async () => {
  // a 512 KiB limit: the synthetic captures stay far below it, a call carrying 600 KB more goes over
  const child = join(ROOT, 'test/support/failed-writes-child.ts');
  const r = await execa(
    'bash',
    [
      '-c',
      'ulimit -f 512; exec "$@"',
      'limited',
      process.execPath,
      '--import',
      'tsx',
      child,
      dir,
      '60',
      String(600 * 1024),
    ],
    { reject: false, cwd: ROOT, timeout: 300_000 },
  );
  assert.equal(
    r.exitCode,
    0,
    `${r.signal ?? ''}\n${String(r.stdout).slice(-3000)}\n${String(r.stderr).slice(-3000)}`,
  );
  assert.match(String(r.stdout), /failed-writes property: 60 runs passed/);
});
