/**
 * Grading commands outlive a polar that dies without exiting (SIGKILL, an OOM kill): execTree kills its live
 * process groups from an `exit` handler those never run, and the --test-timeout timer dies with polar. The
 * reaper (src/rollout/reaper.mjs) kills them when polar's pipe to it closes without `done`.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { execTree } from '../../../src/rollout/exec.ts';
import { ROOT } from '../../support/cli.ts';
import { endsWithin } from '../../support/processes.ts';
import { tempDir } from '../../support/temp.ts';

/** What `file` says once something is written there (bounded: fails rather than hangs). */
async function written(file: string): Promise<string> {
  for (let i = 0; i < 1500; i++) {
    const text = existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
    if (text) return text;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`the test command never started (${file})`);
}

test('a test run started by execTree ends when polar is killed with SIGKILL', async () => {
  const dir = tempDir('polar-reaper-');
  const file = join(dir, 'pid');
  const exec = pathToFileURL(join(ROOT, 'src/rollout/exec.ts')).href;
  // a polar stand-in: grades with a command that runs for 5 minutes, then is killed mid-run (once
  // execTree has returned its promise: the group is started and the reaper told, both synchronously)
  const script = `import { writeFileSync } from 'node:fs';
import { execTree } from ${JSON.stringify(exec)};
const run = execTree('bash', ['-c', 'sleep 300 & echo $! > ${file}; wait'], { timeoutMs: 600000 });
writeFileSync(${JSON.stringify(`${file}.told`)}, 'yes');
await run;`;
  const polar = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: ROOT,
    stdio: 'ignore',
  });
  const sleeper = Number(await written(file));
  await written(`${file}.told`);
  polar.kill('SIGKILL');
  assert.ok(await endsWithin(sleeper, 10_000), 'the test command ended with polar');
});

test('a command that ends normally leaves nothing for the reaper; polar exits at once', async () => {
  const r = await execTree('bash', ['-c', 'echo ok'], { timeoutMs: 10_000 });
  assert.equal(r.exitCode, 0);
  assert.equal(r.output, 'ok\n');
});
