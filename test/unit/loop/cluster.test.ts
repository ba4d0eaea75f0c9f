/**
 * What a loop step's cluster rollouts run: a rollout job of the loop's own evaluation (its harness on its
 * backend, in its runtime, graded as it grades) with the step's tasks, samples, folder and meta, and the
 * executor of the --cluster flags; what `polar job -` reads back of it; the loop's flags refused
 * with the embedded engine or a judge.
 */
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { UsageError } from '../../../src/errors.ts';
import { stepJob } from '../../../src/loop/cluster.ts';
import { loopEvaluation } from '../../../src/loop/phases.ts';
import { parseJob } from '../../../src/rollout/executors/job.ts';
import { POLAR_BIN } from '../../../src/train/cluster/polar.ts';
import { loopArgv, parseArgv, SERVED_POLICY, usageError } from '../../support/argv.ts';
import { tempDir } from '../../support/temp.ts';

const ARGV = [
  'node',
  'polar',
  'loop',
  '--train-set',
  'train.jsonl',
  '--eval-set=held.jsonl',
  '--harness',
  'pi',
  ...SERVED_POLICY,
  '--train-model',
  'ckpt',
  '--group-size',
  '4',
  '--tasks-per-step',
  '2',
  '--steps',
  '3',
  '--eval-every',
  '1',
  '--runtime',
  'sandbox',
  '--grade-empty-patches',
  '--lora',
  '--lr',
  '1e-5',
  '--device',
  'cuda',
  '--train-config',
  'train.json',
  '--reload-cmd',
  './restart {checkpoint}',
  '--cluster',
  'ray=10.0.0.1:6379',
  '--cluster-memory',
  '4GiB',
  '--concurrency',
  '16',
  '--out',
  'runs/l',
  '--resume',
  '-q',
];

test("a step's rollout job: the loop's evaluation of the step's tasks on the cluster's executor", async () => {
  const { loopOptions } = await import('../../../src/loop/command.ts');
  const key = process.env.POLAR_BACKEND_API_KEY;
  process.env.POLAR_BACKEND_API_KEY = 'sk-from-env';
  try {
    const o = loopOptions(parseArgv(ARGV.slice(2)).flags as never);
    assert.ok(o.cluster);
    const run = {
      instanceIds: ['a__b-1', 'a__b-2'],
      samples: 4,
      out: '/runs/l/step-1/eval',
      dataset: 'train.jsonl',
      concurrency: 16,
      meta: { policy: 'step-0', loop_step: '1' },
      quiet: true,
    };
    const job = stepJob(loopEvaluation(o), o, o.cluster, run);
    assert.deepEqual(
      [job.dataset, job.instances, job.samples, job.out, job.concurrency, job.meta],
      ['train.jsonl', ['a__b-1', 'a__b-2'], 4, '/runs/l/step-1/eval', 16, run.meta],
    );
    assert.deepEqual(job.executor, {
      kind: 'ray',
      address: '10.0.0.1:6379',
      cpus: 1,
      memoryBytes: 4 * 1024 ** 3,
      retries: 3,
      polar: [process.execPath, POLAR_BIN],
    });
    // the loop's harness on its backend, in its runtime, graded as the loop grades
    assert.equal(job.setup.agent.agent, 'pi');
    assert.deepEqual(
      [job.setup.agent.backend?.kind, job.setup.agent.backend?.url, job.setup.agent.backend?.model],
      ['vllm', 'http://10.0.0.2:8000/v1', 'Qwen/Qwen3-4B'],
    );
    assert.equal(job.setup.runtime.kind, 'sandbox');
    assert.deepEqual([job.grader, job.gradeEmpty, job.resume], [{ kind: 'polar' }, true, false]);
    // an interrupted step that polar loop --resume continues keeps its graded samples (issue 47 item 5)
    assert.equal(stepJob(loopEvaluation(o), o, o.cluster, { ...run, resume: true }).resume, true);
    // a key read from the environment stays out of the job: the step's eval reads its own
    assert.equal(job.setup.agent.backend?.apiKey, undefined);
    // polar job - reads back what the loop wrote, field for field
    assert.deepEqual(parseJob(JSON.stringify(job), '(stdin)'), job);
    // the loop's record: engine and address, not the executor (its words may hold a key)
    assert.deepEqual(JSON.parse(JSON.stringify({ cluster: o.cluster })).cluster, {
      engine: 'ray',
      address: '10.0.0.1:6379',
    });
  } finally {
    if (key === undefined) delete process.env.POLAR_BACKEND_API_KEY;
    else process.env.POLAR_BACKEND_API_KEY = key;
  }
});

test('polar loop --cluster with the embedded engine is refused, naming both flags', async () => {
  const { loopOptions } = await import('../../../src/loop/command.ts');
  const { flags } = parseArgv(
    loopArgv(['--cluster', 'slurm'], { policy: ['--backend', 'embedded', '--model', 'tiny'] }),
  );
  assert.throws(
    () => loopOptions(flags as never),
    (e: unknown) => e instanceof UsageError && /--cluster slurm with --backend embedded/.test(e.message),
  );
});

test('polar loop --cluster with a judge or --reward is refused before any step (as polar eval refuses it)', async () => {
  const { loopOptions } = await import('../../../src/loop/command.ts');
  const dir = tempDir('polar-loop-judge-');
  try {
    const rubric = join(dir, 'rubric.md');
    writeFileSync(rubric, 'Score 1 when the tests pass.\n');
    const { flags } = parseArgv(loopArgv(['--cluster', 'ray', '--grader', 'judge', '--rubric', rubric]));
    assert.throws(
      () => loopOptions(flags as never),
      (e: unknown) => e instanceof UsageError && /--cluster with a judge: not supported yet/.test(e.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("polar job takes the job (a file, or - for stdin), a cluster tag and -q: nothing of eval's flags", () => {
  const parsed = parseArgv(['job', '-', '-q', '--cluster-tag', '{"engine":"slurm","shard":2}']);
  assert.deepEqual(parsed.args, ['-']);
  assert.deepEqual(parsed.flags, { quiet: true, clusterTag: { engine: 'slurm', shard: 2 } });
  assert.match(usageError(['job', 'j.json', '--agent', 'pi']) ?? '', /unknown option '--agent'/);
});
