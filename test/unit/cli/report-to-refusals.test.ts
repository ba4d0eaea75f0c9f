/**
 * Where --report-to cannot work, polar refuses before anything is made or started, naming the flag and
 * the fix: `polar train --nnodes > 1` (torchrun picks which node runs global rank 0, so no node knows it
 * would write) and `polar eval --cluster slurm` (the Slurm merge job makes report.json and starts no
 * writer). Neither starts Python; the run folder is not created. The python-tier side (a refused train
 * leaves none of the writer's files): test/unit/train/report-to.test.ts.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { polarInProcess } from '../../support/cli.ts';

const tmp = await mkdtemp(join(tmpdir(), 'polar-report-refusals-'));
after(() => rm(tmp, { recursive: true, force: true }));

test('polar train --nnodes 2 --report-to tensorboard: refused, nothing made', async () => {
  const traj = join(tmp, 'traj.jsonl');
  await writeFile(traj, '{}\n');
  const out = join(tmp, 'train-out');
  const r = await polarInProcess([
    'train',
    traj,
    '--model',
    'tiny',
    '--nnodes',
    '2',
    '--node-rank',
    '0',
    '--rdzv-endpoint',
    '127.0.0.1:29500',
    '--report-to',
    'tensorboard',
    '--out',
    out,
  ]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /--report-to with --nnodes > 1 is not supported/);
  assert.match(r.stderr, /drop --report-to .*or train on one node/);
  assert.ok(!existsSync(out), 'no run folder');
});

test('polar eval --cluster slurm --report-to wandb: refused before the dataset is read, nothing made', async () => {
  const out = join(tmp, 'eval-out');
  const r = await polarInProcess([
    'eval',
    '--dataset',
    join(tmp, 'absent.jsonl'),
    '--predictions',
    join(tmp, 'absent-predictions.jsonl'),
    '--cluster',
    'slurm',
    '--report-to',
    'wandb',
    '--out',
    out,
  ]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /--report-to is not supported with --cluster slurm yet/);
  assert.match(r.stderr, /drop --report-to .*--cluster ray or without --cluster/);
  assert.ok(!existsSync(out), 'no run folder');
});
