/**
 * A harness run's abort signal (src/harnesses/process.ts; polar loop --overdue drop cancels one group's
 * samples through it): aborting one run ends that harness's process group, by its pid, as a forwarded
 * interrupt does (the result says interrupted), and leaves another harness running beside it alone; what
 * the harness started in a session of its own (a detached tool) ends with it.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { runHarnessProcess } from '../../../src/harnesses/process.ts';
import { endsWithin, running } from '../../support/processes.ts';
import { tempDir } from '../../support/temp.ts';

/**
 * A stand-in harness that says its pid in `file` once it runs, then runs until it is ended (or, should the
 * abort not reach it, exits 3 by itself after a minute: the checks then fail, never hang).
 */
function harness(file: string, signal: AbortSignal) {
  const script = `require('fs').writeFileSync(${JSON.stringify(file)}, String(process.pid)); setTimeout(() => process.exit(3), 60000);`;
  return runHarnessProcess(process.execPath, ['-e', script], {
    env: {},
    stdio: 'pipe',
    stdin: 'ignore',
    runDir: null,
    signal,
  });
}

/** The pid a stand-in wrote, once it has (bounded: fails rather than hangs). */
async function pidIn(file: string): Promise<number> {
  for (let i = 0; i < 1500; i++) {
    if (existsSync(file)) {
      const text = readFileSync(file, 'utf8');
      if (text) return Number(text);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`the stand-in harness never started (${file})`);
}

test('an aborted harness run ends that harness alone, as interrupted', async () => {
  const dir = tempDir('polar-harness-abort-');
  const one = new AbortController();
  const two = new AbortController();
  const first = harness(join(dir, 'one'), one.signal);
  const second = harness(join(dir, 'two'), two.signal);
  let secondEnded = false;
  void second.finally(() => {
    secondEnded = true;
  });
  await pidIn(join(dir, 'one'));
  const pid2 = await pidIn(join(dir, 'two'));
  one.abort(new Error('cancelled'));
  const r1 = await first;
  assert.equal(r1.interrupted, true);
  assert.equal(r1.result.signal, 'SIGTERM', 'ended by SIGTERM to its group');
  assert.equal(secondEnded, false, 'the other harness still runs');
  assert.ok(running(pid2));
  two.abort(new Error('cancelled'));
  const r2 = await second;
  assert.equal(r2.interrupted, true);
  // a run aborted before it starts is ended as soon as it is spawned
  const r3 = await harness(join(dir, 'three'), AbortSignal.abort());
  assert.equal(r3.interrupted, true);
});

test('an aborted harness run ends what the harness started in a session of its own too', async () => {
  // a harness that starts a tool as Pi starts its bash tool (detached: a session and group of its own)
  // and, unlike Pi, leaves it behind when it is ended
  const dir = tempDir('polar-harness-abort-tool-');
  const tool = `require('fs').writeFileSync(${JSON.stringify(join(dir, 'tool'))}, String(process.pid)); setTimeout(() => process.exit(3), 60000);`;
  const script = `require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(tool)}], { detached: true, stdio: 'ignore' }).unref(); setTimeout(() => process.exit(3), 60000);`;
  const cancel = new AbortController();
  const run = runHarnessProcess(process.execPath, ['-e', script], {
    env: {},
    stdio: 'pipe',
    stdin: 'ignore',
    runDir: null,
    signal: cancel.signal,
  });
  const toolPid = await pidIn(join(dir, 'tool'));
  cancel.abort(new Error('cancelled'));
  const r = await run;
  assert.equal(r.interrupted, true);
  assert.ok(
    await endsWithin(toolPid, 10_000),
    'the tool in its own session ended with the cancelled harness',
  );
});

test('a harness run past its timeout ends with what it started in a session of its own', async () => {
  // execa's timeout signals the harness alone: the detached tool ran on after the harness timed out
  const dir = tempDir('polar-harness-timeout-tool-');
  const tool = `require('fs').writeFileSync(${JSON.stringify(join(dir, 'tool'))}, String(process.pid)); setTimeout(() => process.exit(3), 60000);`;
  const script = `require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(tool)}], { detached: true, stdio: 'ignore' }).unref(); setTimeout(() => process.exit(3), 60000);`;
  const run = runHarnessProcess(process.execPath, ['-e', script], {
    env: {},
    stdio: 'pipe',
    stdin: 'ignore',
    runDir: null,
    timeoutMs: 3000,
  });
  const toolPid = await pidIn(join(dir, 'tool'));
  const r = await run;
  assert.equal(r.result.timedOut, true);
  assert.equal(r.interrupted, false);
  assert.ok(
    await endsWithin(toolPid, 10_000),
    'the tool in its own session ended with the timed-out harness',
  );
});
