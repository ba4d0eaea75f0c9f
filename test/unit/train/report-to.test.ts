/**
 * `polar train --report-to` on the CPU with the tiny model: the trainer's own figures (metrics.jsonl)
 * read back from the TensorBoard event files with EventAccumulator, and from the W&B offline run with
 * `wandb leet inspect` when wandb can be imported; `--resume` continues the same steps and the same W&B
 * run id; a run without --report-to starts no writer and no Python process of it looks tensorboard or
 * wandb up; a tracker that cannot be imported is named with the command that installs it; a train refused
 * before its first step (a tracker missing, bad trajectories) leaves none of the writer's files.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { runPolar } from '../../support/cli.ts';
import {
  canImport,
  tensorboardScalars,
  wandbHistory,
  wandbRunFiles,
  watchTrackerImports,
} from '../../support/trackers.ts';
import {
  madeUpLogprobs,
  tempDir as makeTempDir,
  NO_TORCH,
  pythonWithTorch,
  smallBatch,
  TINY,
  writeJsonl,
} from './fixtures.ts';

const made: string[] = [];
after(async () => {
  for (const dir of made) await rm(dir, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const dir = await makeTempDir();
  made.push(dir);
  return dir;
}

const probe = await pythonWithTorch();
const python = probe?.python ?? '';
const TB =
  probe && (await canImport(python, 'tensorboard'))
    ? false
    : 'tensorboard is not installed (npm run setup installs the tracking group)';
const WANDB =
  probe && (await canImport(python, 'wandb')) ? false : 'wandb cannot be imported (polar setup --wandb)';

async function train(dir: string, extra: string[], env: Record<string, string> = {}) {
  const traj = join(dir, 'traj.jsonl');
  if (!existsSync(traj)) await writeJsonl(traj, smallBatch());
  return runPolar(
    [
      'train',
      traj,
      '--model',
      TINY,
      '--device',
      'cpu',
      '--out',
      join(dir, 'out'),
      '--batch-rollouts',
      '4',
      '--save-every',
      '1',
      '--config',
      await madeUpLogprobs(dir),
      ...extra,
    ],
    {
      env: { POLAR_PYTHON: python, WANDB_MODE: 'offline', WANDB_SILENT: 'true', ...env },
      timeoutMs: 480_000,
    },
  );
}

async function metrics(out: string): Promise<Array<Record<string, number>>> {
  const text = await readFile(join(out, 'metrics.jsonl'), 'utf8');
  return text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
}

/** The figures every step logs, checked value by value (float32 in the event files). */
const CHECKED = [
  'loss',
  'pg_loss',
  'kl',
  'clip_frac',
  'clip_frac_low',
  'clip_frac_high',
  'ratio_mean',
  'entropy',
  'grad_norm',
  'lr',
  'tokens_per_s',
];

function close(actual: number, expected: number, what: string): void {
  assert.ok(
    Math.abs(actual - expected) <= 1e-6 * Math.max(1, Math.abs(expected)),
    `${what}: ${actual} != ${expected}`,
  );
}

describe('polar train --report-to', { skip: probe ? false : NO_TORCH }, () => {
  test(
    "tensorboard: each of the trainer's figures at each step; --resume continues the steps",
    { skip: TB },
    async () => {
      const dir = await tempDir();
      const out = join(dir, 'out');
      const first = await train(dir, ['--report-to', 'tensorboard', '--max-steps', '1']);
      assert.equal(first.exitCode, 0, first.stderr);
      const second = await train(dir, ['--report-to', 'tensorboard', '--max-steps', '2', '--resume']);
      assert.equal(second.exitCode, 0, second.stderr);
      const lines = await metrics(out);
      assert.deepEqual(
        lines.map((m) => m.step),
        [1, 2],
      );
      const scalars = await tensorboardScalars(python, join(out, 'tensorboard'));
      for (const key of CHECKED) {
        const series = scalars[`train/${key}`];
        assert.ok(series, `train/${key} was logged`);
        assert.deepEqual(
          series.map(([s]) => s),
          [1, 2],
          `train/${key} at steps 1 and 2`,
        );
        for (const [i, [, value]] of series.entries())
          close(value, lines[i]![key]!, `train/${key} step ${i + 1}`);
      }
      const tracking = JSON.parse(await readFile(join(out, 'tracking.json'), 'utf8'));
      assert.deepEqual(tracking, { v: 1, tensorboard: { dir: join(out, 'tensorboard') }, wandb: null });
    },
  );

  test('wandb (offline): the same history, and --resume keeps the run id', { skip: WANDB }, async () => {
    const dir = await tempDir();
    const out = join(dir, 'out');
    const first = await train(dir, ['--report-to', 'wandb', '--max-steps', '1', '--run-name', 'tiny']);
    assert.equal(first.exitCode, 0, first.stderr);
    const id = JSON.parse(await readFile(join(out, 'tracking.json'), 'utf8')).wandb.id;
    const second = await train(dir, [
      '--report-to',
      'wandb',
      '--max-steps',
      '2',
      '--run-name',
      'tiny',
      '--resume',
    ]);
    assert.equal(second.exitCode, 0, second.stderr);
    const tracking = JSON.parse(await readFile(join(out, 'tracking.json'), 'utf8'));
    assert.deepEqual(tracking.wandb, { id, project: 'polar', name: 'tiny' });
    const files = wandbRunFiles(out);
    assert.equal(files.length, 2, 'an offline run folder per process');
    for (const f of files) assert.ok(f.endsWith(`run-${id}.wandb`), `${f} belongs to run ${id}`);
    const rows = [];
    for (const f of files) rows.push(...(await wandbHistory(python, f)));
    const lines = await metrics(out);
    for (const line of lines) {
      const row = rows.find((r) => r['train/step'] === line.step);
      assert.ok(row, `a history row at train/step ${line.step}`);
      for (const key of CHECKED) close(row[`train/${key}`]!, line[key]!, `train/${key} step ${line.step}`);
    }
  });

  test('without --report-to: no writer, no tracking files, neither package imported', async () => {
    const dir = await tempDir();
    const watch = await watchTrackerImports(dir);
    const r = await train(dir, ['--max-steps', '1'], watch.env);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.deepEqual(watch.imports(), [], 'no Python process of the run imported tensorboard or wandb');
    assert.ok(!existsSync(join(dir, 'out', 'tracking.json')));
    assert.ok(!existsSync(join(dir, 'out', 'tensorboard')));
    assert.ok(!existsSync(join(dir, 'out', 'wandb')));
  });

  test('a tracker that cannot be imported is named with its install command, before training', async () => {
    const dir = await tempDir();
    // a Python whose `import wandb` fails, whatever is installed (sitecustomize blocks it)
    const block = join(dir, 'block');
    await mkdir(block);
    await writeFile(join(block, 'sitecustomize.py'), "import sys\nsys.modules['wandb'] = None\n");
    const wrapper = join(dir, 'python');
    await writeFile(
      wrapper,
      `#!/bin/sh\nPYTHONPATH="${block}\${PYTHONPATH:+:$PYTHONPATH}" exec ${python} "$@"\n`,
    );
    await chmod(wrapper, 0o755);
    const r = await train(dir, ['--report-to', 'wandb', '--python', wrapper]);
    assert.equal(r.exitCode, 4, r.stderr);
    assert.match(r.stderr, /--report-to: wandb cannot be imported/);
    assert.match(r.stderr, /polar setup --wandb/);
    assert.ok(!existsSync(join(dir, 'out')), 'nothing was made: no run folder, no tracking.json');
  });

  test("a train refused before its first step leaves none of the writer's files", { skip: TB }, async () => {
    const dir = await tempDir();
    const bad = join(dir, 'bad.jsonl');
    await writeFile(bad, '{}\n');
    const out = join(dir, 'out');
    const r = await runPolar(
      ['train', bad, '--model', TINY, '--device', 'cpu', '--report-to', 'tensorboard', '--out', out],
      { env: { POLAR_PYTHON: python }, timeoutMs: 240_000 },
    );
    assert.equal(r.exitCode, 3, r.stderr);
    assert.match(r.stderr, /bad\.jsonl:1/);
    assert.ok(!existsSync(out), 'no run folder: no tracking.json, no tensorboard/, no tracking.log');
    // into a run folder that was there: what it held stays, nothing is added
    await mkdir(out);
    await writeFile(join(out, 'notes.txt'), 'mine\n');
    const again = await runPolar(
      ['train', bad, '--model', TINY, '--device', 'cpu', '--report-to', 'tensorboard', '--out', out],
      { env: { POLAR_PYTHON: python }, timeoutMs: 240_000 },
    );
    assert.equal(again.exitCode, 3, again.stderr);
    assert.deepEqual(await readdir(out), ['notes.txt']);
  });

  test('--run-name without --report-to is refused', async () => {
    const dir = await tempDir();
    const r = await train(dir, ['--run-name', 'x']);
    assert.equal(r.exitCode, 2, r.stderr);
    assert.match(r.stderr, /--run-name is for a run that reports: add --report-to/);
  });
});
