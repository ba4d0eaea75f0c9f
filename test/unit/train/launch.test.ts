import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { EXIT, InputError } from '../../../src/errors.ts';
import { WORKER_DIR, workerCommand } from '../../../src/train/launch.ts';
import { checkTrajectories } from '../../../src/train/trajectories.ts';
import { runWorker, workerError } from '../../../src/train/worker-process.ts';
import { smallBatch, tempDir, trajectory, writeJsonl } from './fixtures.ts';

describe('worker command', () => {
  test('one GPU or CPU: python -m polar_train with the worker on PYTHONPATH', () => {
    const c = workerCommand({ python: '/usr/bin/python3', configPath: '/o/config.json', processes: 1 });
    assert.equal(c.file, '/usr/bin/python3');
    assert.deepEqual(c.args, ['-m', 'polar_train', '--config', '/o/config.json']);
    assert.equal(c.env.PYTHONPATH, WORKER_DIR);
    assert.equal(c.env.PYTHONUNBUFFERED, '1');
  });

  test('--gpus N or --nproc N: torchrun (torch.distributed.run) with N local processes', () => {
    const c = workerCommand({ python: 'python3', configPath: 'c.json', processes: 4, pythonPath: '/extra' });
    assert.deepEqual(c.args, [
      '-m',
      'torch.distributed.run',
      '--standalone',
      '--nnodes=1',
      '--nproc_per_node=4',
      '-m',
      'polar_train',
      '--config',
      'c.json',
    ]);
    assert.equal(c.env.PYTHONPATH, `${WORKER_DIR}:/extra`);
  });
});

/** A stand-in worker: a node script, so these tests need no Python. */
function fake(script: string) {
  return { file: process.execPath, args: ['-e', script], env: {} };
}

describe('worker outcome', () => {
  test('a crash (traceback, exit 1, no error event) becomes one clear line, the log keeps everything', async () => {
    const dir = await tempDir();
    const logPath = join(dir, 'worker.log');
    const events: unknown[] = [];
    const o = await runWorker(
      fake(
        `console.log(JSON.stringify({event:'step',step:1,total_steps:2}));
         console.error('Traceback (most recent call last):\\n  File "x.py", line 1\\nRuntimeError: CUDA out of memory');
         process.exit(1)`,
      ),
      (e) => events.push(e),
      logPath,
    );
    assert.equal(events.length, 1);
    const err = workerError(o, { logPath, out: dir });
    assert.ok(err);
    assert.equal(err.message, 'training worker crashed (exit code 1): RuntimeError: CUDA out of memory');
    assert.ok(!err.message.includes('\n'));
    assert.match(err.hint ?? '', /worker\.log/);
    assert.match(await readFile(logPath, 'utf8'), /Traceback[\s\S]*line 1/);
  });

  test('an event that breaks the protocol (src/train/schema.ts) is an error naming the field', async () => {
    const dir = await tempDir();
    const logPath = join(dir, 'worker.log');
    const events: unknown[] = [];
    const o = await runWorker(
      fake(
        `console.log(JSON.stringify({event:'checkpoint',step:1,path:'/o/step-1',format:'pickle'}));
         console.log(JSON.stringify({event:'done',steps:1,checkpoint:'/o/step-1'}))`,
      ),
      (e) => events.push(e),
      logPath,
    );
    assert.equal(o.exitCode, 0);
    assert.deepEqual(events, [{ event: 'done', steps: 1, checkpoint: '/o/step-1' }]);
    const err = workerError(o, { logPath, out: dir });
    assert.match(
      err?.message ?? '',
      /training worker broke its protocol: .*"checkpoint".*: format: .*"safetensors"/,
    );
    assert.match(err?.hint ?? '', /src\/train\/schema\.ts/);
  });

  test('an error event is the message; non-finite points at --resume; a signal is named', async () => {
    const dir = await tempDir();
    const logPath = join(dir, 'worker.log');
    const o = await runWorker(
      fake(
        `console.log(JSON.stringify({event:'error',kind:'ValueError',message:'token id 40 is outside the vocabulary',traceback:'TB'}));process.exit(1)`,
      ),
      () => {},
      logPath,
    );
    assert.equal(
      workerError(o, { logPath, out: dir })?.message,
      'training worker failed: token id 40 is outside the vocabulary',
    );
    const nan = await runWorker(
      fake(
        `console.log(JSON.stringify({event:'error',kind:'non_finite',message:'non-finite loss at step 3'}));process.exit(3)`,
      ),
      () => {},
      logPath,
    );
    const e = workerError(nan, { logPath, out: '/ck' });
    assert.match(e?.message ?? '', /^training stopped: non-finite loss at step 3/);
    assert.match(e?.hint ?? '', /--resume \(--out \/ck\)/);
    // a checkpoint the worker cannot resume (checkpoint.py CheckpointError): bad input, its message kept
    const refused = await runWorker(
      fake(
        `console.log(JSON.stringify({event:'error',kind:'checkpoint',message:'resume: /ck/step-2 is checkpoint version 3'}));process.exit(1)`,
      ),
      () => {},
      logPath,
    );
    const r = workerError(refused, { logPath, out: '/ck' });
    assert.equal(r?.message, 'training refused: resume: /ck/step-2 is checkpoint version 3');
    assert.equal(r?.exitCode, EXIT.badInput);
    const killed = await runWorker(fake(`process.kill(process.pid, 'SIGKILL')`), () => {}, logPath);
    assert.match(workerError(killed, { logPath, out: dir })?.message ?? '', /killed by SIGKILL/);
    const quiet = await runWorker(fake(`process.exit(0)`), () => {}, logPath);
    assert.match(workerError(quiet, { logPath, out: dir })?.message ?? '', /without finishing/);
    // a node of rank > 0 (--nnodes): only global rank 0 reports done, so exit 0 is its success
    assert.equal(workerError(quiet, { logPath, out: dir, follower: true }), undefined);
    assert.match(
      workerError(killed, { logPath, out: dir, follower: true })?.message ?? '',
      /killed by SIGKILL/,
    );
    const ok = await runWorker(
      fake(`console.log(JSON.stringify({event:'done',steps:1}))`),
      () => {},
      logPath,
    );
    assert.equal(workerError(ok, { logPath, out: dir }), undefined);
  });
});

describe('trajectory checks before training', () => {
  test('sums the batch and finds the largest rollout', async () => {
    const dir = await tempDir();
    const file = await writeJsonl(join(dir, 't.jsonl'), smallBatch());
    const s = await checkTrajectories(file, { requireLogprobs: true, maxTraceTokens: 100 });
    assert.equal(s.rollouts, 8);
    assert.equal(s.traces, 8);
    assert.equal(s.trainedTokens, 32);
    assert.equal(s.maxTraceTokens, 9);
    assert.equal(s.maxTrainedPerRollout, 4);
  });

  test('traces without logprobs are refused while TIS is on, with the opt-out named', async () => {
    const dir = await tempDir();
    const file = await writeJsonl(join(dir, 't.jsonl'), smallBatch({ logprobs: false }));
    await assert.rejects(
      checkTrajectories(file, { requireLogprobs: true, maxTraceTokens: 100 }),
      (e: unknown) => {
        assert.ok(e instanceof InputError);
        assert.equal(e.line, 1);
        assert.equal(e.field, 'traces[0].response_logprobs');
        assert.match(e.hint ?? '', /--no-tis/);
        return true;
      },
    );
    await checkTrajectories(file, { requireLogprobs: false, maxTraceTokens: 100 });
  });

  test('unscored rollouts, over-long traces and invalid lines name file:line', async () => {
    const dir = await tempDir();
    const unscored = await writeJsonl(join(dir, 'a.jsonl'), [
      ...smallBatch().slice(0, 2),
      trajectory('x', [{ prompt: [1], response: [2], mask: [1] }], null),
    ]);
    await assert.rejects(
      checkTrajectories(unscored, { requireLogprobs: true, maxTraceTokens: 100 }),
      /a\.jsonl:3: reward/,
    );
    const file = await writeJsonl(join(dir, 'b.jsonl'), smallBatch());
    await assert.rejects(
      checkTrajectories(file, { requireLogprobs: true, maxTraceTokens: 8 }),
      /b\.jsonl:1: traces\[0\]: 9 tokens/,
    );
    const bad = await writeJsonl(join(dir, 'c.jsonl'), [{ v: 1, id: 'x' }]);
    await assert.rejects(checkTrajectories(bad, { requireLogprobs: true, maxTraceTokens: 8 }), /c\.jsonl:1/);
  });
});
