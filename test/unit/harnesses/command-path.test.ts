/**
 * The harness command is looked up as execa's preferLocal starts it (issue 31 item 12: a harness that
 * cannot start is refused before any session is opened, and one that would start is never refused).
 */
import assert from 'node:assert/strict';
import { chmod, mkdir, realpath, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { execa } from 'execa';
import { checkHarnessCommand } from '../../../src/capture/run.ts';
import { harnessSearchPath, resolveCommand } from '../../../src/harnesses/process.ts';
import { tempDir } from '../../support/temp.ts';

const start = process.cwd();
after(() => process.chdir(start));

test('a harness in a parent folder node_modules/.bin is found, as execa finds it', async () => {
  const project = await realpath(tempDir('polar-cmdpath-'));
  const bin = join(project, 'node_modules', '.bin');
  await mkdir(bin, { recursive: true });
  const script = join(bin, 'fake-harness-xyz');
  await writeFile(script, '#!/bin/sh\necho started\n');
  await chmod(script, 0o755);
  const sub = join(project, 'a', 'b');
  await mkdir(sub, { recursive: true });
  process.chdir(sub);
  // execa with preferLocal from the same folder starts it: the check must agree
  const r = await execa('fake-harness-xyz', [], {
    preferLocal: true,
    localDir: process.cwd(),
    reject: false,
  });
  assert.equal(r.stdout, 'started');
  assert.equal(resolveCommand('fake-harness-xyz', harnessSearchPath('/nonexistent')), script);
  assert.doesNotThrow(() => checkHarnessCommand(['fake-harness-xyz'], 'generic'));
  // a relative path resolves against the harness's working directory
  assert.equal(resolveCommand('node_modules/.bin/fake-harness-xyz', '', project), script);
  assert.throws(
    () => checkHarnessCommand(['no-such-harness-xyz'], 'pi'),
    /could not start the harness `no-such-harness-xyz`: command not found/,
  );
});

test("the harness's PATH, when given, is the one searched", async () => {
  const dir = await realpath(tempDir('polar-cmdpath-env-'));
  const script = join(dir, 'only-here-xyz');
  await writeFile(script, '#!/bin/sh\n');
  await chmod(script, 0o755);
  assert.throws(() => checkHarnessCommand(['only-here-xyz'], 'generic'), /command not found/);
  assert.doesNotThrow(() => checkHarnessCommand(['only-here-xyz'], 'generic', undefined, dir));
});
