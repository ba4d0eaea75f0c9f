/**
 * SIGTERM stops a long-running command as Ctrl-C does (issue 31 item 1): CI timeouts, Slurm and
 * Kubernetes send SIGTERM. `polar eval` starts no new sample, sets the running one aside for --resume and
 * exits 143 with a report that makes up no figure (item 5); `polar loop` stops in its rollouts and exits
 * 143 without starting another harness. Both run the real CLI in a subprocess and signal it.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { ResultPromise } from 'execa';
import { ensureFixtureRepos } from '../../scripts/swe-fixtures.ts';
import { tinyLlamaSpec } from '../../src/export/export.ts';
import { findPython } from '../../src/train/env.ts';
import { privateDirs, privateEnv } from '../support/capture-run.ts';
import { ROOT, startPolar } from '../support/cli.ts';

const MINI = join(ROOT, 'fixtures/swe/mini.jsonl');
const REPOS = join(ROOT, 'fixtures/swe/repos');
const python = await findPython(process.env.POLAR_PYTHON).catch(() => null);

/** Polls `ready` until it holds (or the process ended, or 120 s passed). */
async function until(child: ResultPromise, ready: () => boolean): Promise<void> {
  const t0 = Date.now();
  while (!ready() && Date.now() - t0 < 120_000) {
    if (child.exitCode !== null && child.exitCode !== undefined) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const lines = (file: string) => readFileSync(file, 'utf8').split('\n').filter(Boolean);

/** A model server that takes every request and never answers: a harness that calls it runs until stopped. */
const requests: string[] = [];
const hanging: Server = createServer((req) => {
  requests.push(String(req.url));
});
await new Promise<void>((r) => hanging.listen(0, '127.0.0.1', r));
const HANGING = `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/v1`;
after(() => {
  hanging.closeAllConnections();
  hanging.close();
});

/** the flags both commands share: the hanging server, no set-up probe, the local runtime */
const COMMON = [
  '--backend',
  'openai',
  '--backend-url',
  HANGING,
  '--model',
  'm',
  '--skip-backend-check',
  '--runtime',
  'local',
  '--allow-unsandboxed',
  '--repos',
  REPOS,
];

/** `polar ARGS` started in a private HOME and workspace (`run`: a folder in it for --out). */
async function start(args: (run: string) => string[], env: Record<string, string> = {}) {
  ensureFixtureRepos();
  const { home, workdir } = await privateDirs();
  const run = join(workdir, 'run');
  const child = startPolar(args(run), {
    cwd: workdir,
    env: { ...privateEnv(home), ...env },
    extendEnv: false,
  });
  return { child, run };
}

describe('SIGTERM stops long-running commands like Ctrl-C', () => {
  test('polar eval: no new sample, the running one set aside, exit 143, no made-up figure', async () => {
    const { child, run: out } = await start((run) => [
      'eval',
      '--dataset',
      MINI,
      '--harness',
      'generic',
      '--agent-cmd',
      'sleep 60',
      ...COMMON,
      '--limit',
      '3',
      '--concurrency',
      '1',
      '--json',
      '--out',
      run,
    ]);
    const captures = join(out, 'captures');
    // the first sample's harness is running: its capture file exists
    await until(child, () => existsSync(captures) && readdirSync(captures).some((f) => f.endsWith('.jsonl')));
    const signalled = Date.now();
    child.kill('SIGTERM');
    const r = await child;
    const took = Date.now() - signalled;
    assert.equal(r.exitCode, 143, String(r.stderr));
    assert.ok(took < 30_000, `stopped ${took} ms after SIGTERM (the harness sleeps 60 s)`);
    assert.match(String(r.stderr), /SIGTERM received: stopping the running samples/);
    // nothing graded, nothing recorded: the sample runs again with --resume, from a fresh capture
    assert.deepEqual(lines(join(out, 'results.jsonl')), []);
    const files = readdirSync(captures);
    assert.deepEqual(
      files.filter((f) => f.endsWith('.jsonl')),
      [],
    );
    assert.equal(files.filter((f) => f.endsWith('.jsonl.interrupted')).length, 1, files.join(', '));
    // no sample graded: no figure (item 5)
    const report = JSON.parse(String(r.stdout));
    assert.equal(report.total, 0);
    assert.equal(report.pending, 3);
    assert.equal(report.pass_at_1.mean, null);
    assert.deepEqual(report.pass_at_1.per_sample, [null]);
    assert.equal(report.pass_at_k['1'], null);
    assert.deepEqual(JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')).pass_at_1.mean, null);
  });

  test(
    'polar loop: stops in its rollouts, starts no other harness, exits 143',
    { skip: python?.transformers ? false : 'no Python with torch and transformers (npm run setup:python)' },
    async () => {
      requests.length = 0;
      const { child, run } = await start(
        (run) => [
          'loop',
          '--train-set',
          join(ROOT, 'fixtures/loop/coin.jsonl'),
          '--harness',
          'pi',
          ...COMMON,
          '--no-require-token-ids',
          '--reload-cmd',
          'true',
          '--train-model',
          tinyLlamaSpec({ seed: 1 }),
          '--device',
          'cpu',
          '--group-size',
          '2',
          '--tasks-per-step',
          '2',
          '--steps',
          '2',
          '--concurrency',
          '1',
          '--out',
          run,
        ],
        { POLAR_PYTHON: python!.executable },
      );
      // Pi's first model call reached the server: a rollout is running
      await until(child, () => requests.length > 0);
      const seen = requests.length;
      assert.ok(seen > 0, 'a rollout called the model');
      child.kill('SIGTERM');
      const r = await child;
      assert.equal(r.exitCode, 143, String(r.stderr));
      assert.match(String(r.stderr), /interrupted by SIGTERM: step 1 stopped after its rollouts/);
      assert.match(String(r.stderr), /--resume/);
      assert.equal(requests.length, seen, 'no harness started after the signal');
      assert.ok(!existsSync(join(run, 'step-1', 'step.json')));
      assert.ok(!existsSync(join(run, 'step-1', 'traj.jsonl')), 'no build after the signal');
    },
  );
});
