/**
 * The README's main job runs offline as written (issue 31 item 7): the lines of its offline block are run
 * one by one in an empty folder, `npx polar` being this clone's bin/polar (a shim on PATH, so nothing is
 * fetched) and Pi the clone's. The hub is off (POLAR_OFFLINE=1), as without a network, and the default
 * model's error names the one-command tiny model. The time each line took is printed (no assertion: the
 * target, a minute, is a figure for a quiet machine).
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { execa } from 'execa';
import { TINY_TRIAL_COMMAND } from '../../src/options/defaults.ts';
import { findPython } from '../../src/train/env.ts';
import { privateEnv } from '../support/capture-run.ts';
import { ROOT } from '../support/cli.ts';
import { runnableBlocks } from '../support/doc-blocks.ts';
import { tempDir } from '../support/temp.ts';

const python = await findPython(process.env.POLAR_PYTHON).catch(() => null);
const work = tempDir('polar-readme-');
const bin = join(work, 'bin');
const home = join(work, 'home');
mkdirSync(bin);
mkdirSync(home);
// `npx polar ...` is this clone's polar; npx is never asked to fetch anything
writeFileSync(
  join(bin, 'npx'),
  `#!/bin/sh\n[ "$1" = polar ] || { echo "npx $1: not in this test" >&2; exit 127; }\nshift\nexec "${process.execPath}" "${join(ROOT, 'bin/polar')}" "$@"\n`,
);
chmodSync(join(bin, 'npx'), 0o755);
const env = {
  ...privateEnv(home),
  PATH: `${bin}:${privateEnv(home).PATH}`,
  POLAR_OFFLINE: '1',
  POLAR_EMBEDDED_THREADS: '1',
  ...(python ? { POLAR_PYTHON: python.executable } : {}),
};

/** The README's blocks this test runs, as commands (each marked `<!-- run by ... -->` before its fence). */
const blocks = () => runnableBlocks('README.md', import.meta.url);

const sh = (line: string, cwd: string) =>
  execa('bash', ['-c', line], {
    cwd,
    env,
    extendEnv: false,
    reject: false,
    stdin: 'ignore',
    timeout: 600_000,
  });

describe("the README's main job, offline", () => {
  test('without the network, the default model names the one-command tiny model', async () => {
    const [first] = blocks();
    const dir = join(work, 'default');
    mkdirSync(dir);
    const r = await sh(first![0]!, dir);
    // as the README says: an error line and a hint line (and the && stops the build)
    assert.notEqual(r.exitCode, 0);
    assert.deepEqual(
      r.stderr.split('\n').filter((l) => l.startsWith('polar: error:') || l.startsWith('  ')).length,
      2,
      r.stderr,
    );
    assert.match(
      r.stderr,
      /polar: error: tokenizer "onnx-community\/Qwen3-0\.6B-ONNX" is a hub id but remote downloads are off/,
    );
    assert.ok(r.stderr.includes(TINY_TRIAL_COMMAND), r.stderr);
  });

  test(
    'the offline block as written: a tiny model, a capture of Pi, a trajectory',
    { skip: python?.transformers ? false : 'no Python with torch (polar setup)' },
    async () => {
      const offline = blocks()[1]!;
      assert.ok(offline[0]!.startsWith(`npx ${TINY_TRIAL_COMMAND}`), 'the block makes the tiny model first');
      const dir = join(work, 'offline');
      mkdirSync(dir);
      for (const line of offline) {
        const t0 = Date.now();
        const r = await sh(line, dir);
        process.stderr.write(`README line (${((Date.now() - t0) / 1000).toFixed(1)} s): ${line}\n`);
        assert.equal(r.exitCode, 0, `${line}\n${r.stderr}`);
      }
      const trajectories = readFileSync(join(dir, 'traj.jsonl'), 'utf8').split('\n').filter(Boolean);
      assert.equal(trajectories.length, 1);
      const record = JSON.parse(trajectories[0]!);
      assert.ok(
        record.traces.length >= 1 && record.traces.every((t: { token_exact: boolean }) => t.token_exact),
      );
    },
  );
});
