/**
 * The trainer's environment of an installed polar (issue 31 item 8): in a project where polar was
 * installed from its packed tarball (test/support/packed-polar.ts), `npx polar setup` makes the Python
 * environment in polar's cache (a pip install of torch and transformers from the machine's index or wheel
 * mirror: slow), and `npx polar train` then finds it there. POLAR_TEST_PACKAGE_SETUP=0 skips it.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import { installPacked } from '../support/packed-polar.ts';
import { smallBatch, TINY } from '../unit/train/fixtures.ts';

describe('npx polar setup in a project that installed polar', () => {
  test(
    "makes the trainer's Python in polar's cache, where polar train finds it",
    { skip: process.env.POLAR_TEST_PACKAGE_SETUP === '0' ? 'POLAR_TEST_PACKAGE_SETUP=0' : false },
    async () => {
      const polar = await installPacked();
      // pip as the user has it set up (an index or a wheel mirror in their pip.conf): their HOME
      const setup = await polar.npx(['setup', '-q'], 420_000, {
        HOME: process.env.HOME ?? polar.home,
        XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME ?? join(process.env.HOME ?? polar.home, '.config'),
      });
      assert.equal(setup.exitCode, 0, String(setup.stderr));
      const python = join(polar.polarHome, 'python', 'bin', 'python');
      assert.equal(String(setup.stdout).trim(), python);
      const probe = await execa(python, ['-c', 'import torch, transformers, peft; print("ok")'], {
        reject: false,
      });
      assert.equal(probe.stdout.trim(), 'ok', probe.stderr);
      // polar train looks there (an installed polar has no .venv beside it; no POLAR_PYTHON)
      const traj = join(polar.project, 'batch.jsonl');
      writeFileSync(
        traj,
        smallBatch()
          .map((r) => `${JSON.stringify(r)}\n`)
          .join(''),
      );
      const train = await polar.npx(
        ['train', traj, '--model', TINY, '--device', 'cpu', '--out', 'ckpt'],
        300_000,
      );
      // the batch's logprobs are made up: the worker, started from that Python, refuses it (exit 3)
      assert.equal(train.exitCode, 3, String(train.stderr));
      assert.match(String(train.stderr), /training refused: .* sampled from another model/);
      const config = JSON.parse(readFileSync(join(polar.project, 'ckpt', 'config.json'), 'utf8'));
      assert.equal(config.environment.python, python);
    },
  );
});
