/**
 * An installed polar's `polar train` finds the trainer's environment where `polar setup` makes it,
 * in polar's cache (issue 31 item 8; `polar setup` itself: test/e2e/package-setup.test.ts). The
 * environment there is the clone's own .venv (`npm run setup`, the same requirements.txt), linked in
 * rather than installed again, so that this file fits the 600 s per-file limit: at most 150 s install +
 * 180 s train.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { VENV_PYTHON } from '../../src/train/env.ts';
import { installPacked } from '../support/packed-polar.ts';
import { smallBatch, TINY } from '../unit/train/fixtures.ts';

describe("an installed polar's train", () => {
  test(
    "finds the trainer's Python in polar's cache (no .venv beside an installed polar, no POLAR_PYTHON)",
    { skip: existsSync(VENV_PYTHON) ? false : 'no .venv (npm run setup:python)' },
    async () => {
      const polar = await installPacked();
      mkdirSync(polar.polarHome, { recursive: true });
      // <polar's cache>/python is what `polar setup` makes: a venv; here the clone's, linked
      symlinkSync(realpathSync(dirname(dirname(VENV_PYTHON))), join(polar.polarHome, 'python'));
      const python = join(polar.polarHome, 'python', 'bin', 'python');
      const traj = join(polar.project, 'batch.jsonl');
      writeFileSync(
        traj,
        smallBatch()
          .map((r) => `${JSON.stringify(r)}\n`)
          .join(''),
      );
      const train = await polar.npx(
        ['train', traj, '--model', TINY, '--device', 'cpu', '--out', 'ckpt'],
        180_000,
      );
      // the batch's logprobs are made up: the worker, started from that Python, refuses it (exit 3)
      assert.equal(train.exitCode, 3, String(train.stderr));
      assert.match(String(train.stderr), /training refused: .* sampled from another model/);
      const config = JSON.parse(readFileSync(join(polar.project, 'ckpt', 'config.json'), 'utf8'));
      assert.equal(config.environment.python, python);
    },
  );
});
