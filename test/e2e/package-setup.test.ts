/**
 * The trainer's environment of an installed polar (issue 31 item 8): in a project where polar was
 * installed from its packed tarball (test/support/packed-polar.ts), `npx polar setup` makes the Python
 * environment in polar's cache (a pip install of torch and transformers from the machine's index or wheel
 * mirror: slow), and it imports. That `polar train` finds an environment there is
 * test/e2e/package-train.test.ts (split off so that each file fits the 600 s per-file limit with margin:
 * here at most 150 s install + 360 s setup). POLAR_TEST_PACKAGE_SETUP=0 skips it.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import { installPacked } from '../support/packed-polar.ts';

describe('npx polar setup in a project that installed polar', () => {
  test(
    "makes the trainer's Python in polar's cache",
    { skip: process.env.POLAR_TEST_PACKAGE_SETUP === '0' ? 'POLAR_TEST_PACKAGE_SETUP=0' : false },
    async () => {
      const polar = await installPacked();
      // pip as the user has it set up (an index or a wheel mirror in their pip.conf): PIP_CONFIG_FILE, which
      // the test runner passes (scripts/test-home.mjs); HOME is the project's own
      const setup = await polar.npx(['setup', '-q'], 360_000);
      assert.equal(setup.exitCode, 0, String(setup.stderr));
      const python = join(polar.polarHome, 'python', 'bin', 'python');
      assert.equal(String(setup.stdout).trim(), python);
      const probe = await execa(python, ['-c', 'import torch, transformers, peft; print("ok")'], {
        reject: false,
        timeout: 60_000,
      });
      assert.equal(probe.stdout.trim(), 'ok', probe.stderr);
    },
  );
});
