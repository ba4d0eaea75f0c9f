// Preloaded by scripts/test.mjs (`--import`) into every test file's process: the test file gets a HOME and
// polar cache of its own, a fresh folder under the run's HOME (scripts/test-home.mjs), removed when the
// file's process exits (kept with POLAR_KEEP_TEST_DIRS=1). node --test's own process, and what a test
// file starts (they inherit the file's), are left as they are.
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { homeEnv } from '../../scripts/test-home.mjs';

const base = process.env.POLAR_TEST_HOME_BASE;
if (base && process.env.NODE_TEST_CONTEXT && !process.env.POLAR_TEST_FILE_HOME) {
  const home = mkdtempSync(join(base, 'file-'));
  Object.assign(process.env, homeEnv(home), { POLAR_TEST_FILE_HOME: home });
  process.on('exit', () => {
    if (process.env.POLAR_KEEP_TEST_DIRS === '1') return;
    try {
      rmSync(home, { recursive: true, force: true, maxRetries: 2 });
    } catch {
      // a folder a test made unreadable: the runner removes the run's HOME
    }
  });
}
