/**
 * Temporary directories for tests: `tempDir(prefix)` makes one under the system's temp folder and removes
 * it when the test file's process exits (every test file runs in a process of its own under node --test),
 * so the suite leaves nothing in /tmp. POLAR_KEEP_TEST_DIRS=1 keeps them (to look at what a failing test
 * wrote) and says where they are.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];
const keep = process.env.POLAR_KEEP_TEST_DIRS === '1';

process.on('exit', () => {
  if (keep) {
    if (made.length > 0) process.stderr.write(`POLAR_KEEP_TEST_DIRS=1: kept ${made.join(' ')}\n`);
    return;
  }
  for (const dir of made) {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
    } catch {
      // a folder a test made unreadable or a mount still in use: left, as little as can be
    }
  }
});

/** A fresh directory `<tmpdir>/<prefix>XXXXXX`, removed when this process exits. */
export function tempDir(prefix = 'polar-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
