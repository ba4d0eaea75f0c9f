/**
 * Issue 17 item 11: `kill -9` of `polar capture` must not leave the harness (and what it started) running,
 * nor its private config dir behind; a run dir a dead polar left is swept at the next start.
 */
import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { execa } from 'execa';
import { privateDirs, privateEnv } from '../support/capture-run.ts';
import { runPolar, startPolar } from '../support/cli.ts';
import { running as alive } from '../support/processes.ts';
import { tempDir } from '../support/temp.ts';
import { type Standin, startStandin } from '../support/vllm-standin.ts';

/** Waits for a condition polled every 50 ms (bounded: the test fails rather than hangs). */
async function until(what: string, check: () => boolean | Promise<boolean>, tries = 600): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`gave up waiting for ${what}`);
}

// the harness: one model call, then it starts a grandchild (a long sleep) and writes both pids
const HARNESS = `
  import { spawn } from 'node:child_process';
  import { writeFileSync } from 'node:fs';
  const r = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
    method: 'POST',
    headers: { authorization: 'Bearer ' + process.env.OPENAI_API_KEY, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await r.json();
  const tool = spawn('sleep', ['300'], { stdio: 'ignore' });
  process.on('SIGTERM', () => {}); // a harness that ignores SIGTERM still goes (SIGKILL follows)
  writeFileSync(process.env.PIDS_FILE + '.tmp', JSON.stringify({ harness: process.pid, tool: tool.pid }));
  (await import('node:fs')).renameSync(process.env.PIDS_FILE + '.tmp', process.env.PIDS_FILE);
  setInterval(() => {}, 1000);`;

describe('polar capture killed with SIGKILL', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin();
  });
  after(() => standin.close());

  for (const stdin of ['ignore', 'pipe'] as const) {
    test(`the harness and its tool die with polar, the run dir goes (stdin ${stdin})`, async () => {
      const { home, workdir, out } = await privateDirs();
      const tmp = join(home, 'tmp');
      await mkdir(tmp);
      const pidsFile = join(home, 'pids.json');
      const polar = startPolar(
        [
          'capture',
          '-o',
          out,
          '--backend',
          'vllm',
          '--backend-url',
          standin.url,
          '--model',
          'm',
          // the kill is the test, not the server's set-up (the stand-in serves another model name)
          '--skip-backend-check',
          '--harness',
          'generic',
          '--pass-env',
          'PIDS_FILE',
          '--',
          'node',
          '--input-type=module',
          '-e',
          HARNESS,
        ],
        {
          cwd: workdir,
          env: { ...privateEnv(home), TMPDIR: tmp, PIDS_FILE: pidsFile },
          extendEnv: false,
          stdin,
        },
      );
      let pids: { harness: number; tool: number } | undefined;
      await until('the harness to start its tool', async () => {
        pids = await readFile(pidsFile, 'utf8').then(JSON.parse, () => undefined);
        return pids !== undefined;
      });
      const runDirs = (await readdir(tmp)).filter((n) => n.startsWith('polar-run-'));
      assert.equal(runDirs.length, 1, 'polar made one private run dir');
      assert.ok(alive(pids!.harness) && alive(pids!.tool));

      polar.kill('SIGKILL');
      const result = await polar;
      assert.equal(result.signal, 'SIGKILL');
      await until('the harness to die', () => !alive(pids!.harness));
      await until("the harness's tool to die", () => !alive(pids!.tool));
      await until('the run dir to be removed', async () =>
        (await readdir(tmp)).every((n) => !n.startsWith('polar-run-')),
      );
    });
  }

  test('a run dir left by a dead polar is removed at the next start; a live one is kept', async () => {
    const { home, workdir, out } = await privateDirs();
    const tmp = tempDir('polar-sweep-');
    const dead = await execa(process.execPath, ['-e', 'console.log(process.pid)']);
    const deadPid = Number(dead.stdout.trim());
    const stale = join(tmp, 'polar-run-stale1');
    const live = join(tmp, 'polar-run-live01');
    const foreign = join(tmp, 'polar-run-noowner');
    for (const [dir, pid] of [
      [stale, deadPid],
      [live, process.pid],
    ] as const) {
      await mkdir(join(dir, 'codex-home'), { recursive: true });
      await writeFile(join(dir, 'polar-owner.json'), JSON.stringify({ pid }));
    }
    await mkdir(foreign);
    assert.ok(!alive(deadPid));
    const r = await runPolar(
      [
        'capture',
        '-o',
        out,
        '--backend',
        'vllm',
        '--backend-url',
        standin.url,
        '--model',
        'm',
        // the sweep is the test, not the server's set-up (the stand-in serves another model name)
        '--skip-backend-check',
        '--',
        'true',
      ],
      { cwd: workdir, env: { ...privateEnv(home), TMPDIR: tmp }, extendEnv: false },
    );
    assert.equal(r.exitCode, 0, r.stderr);
    const left = (await readdir(tmp)).filter((n) => n.startsWith('polar-run-')).sort();
    assert.deepEqual(left, ['polar-run-live01', 'polar-run-noowner'], "only the dead owner's dir went");
  });
});
