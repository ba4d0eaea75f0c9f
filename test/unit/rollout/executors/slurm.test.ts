/**
 * The Slurm side of `polar eval --cluster slurm` without a cluster: squeue's lines read into states (the
 * shapes squeue 22.05 prints for an array job: `ID_[2-4]` while tasks are pending as one record, `ID_N`
 * once a task is on its own), and the shard script run by bash with a stand-in polar that records its
 * arguments: the shard's job file, the exit file, the node tag; the shard's and the merge's jobs. The real
 * engine: test/e2e/cluster-slurm.test.ts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { SweInstance } from '../../../../src/rollout/dataset.ts';
import { ROLLOUT_JOB_VERSION, readJob, type SlurmJob } from '../../../../src/rollout/executors/job.ts';
import { parseSqueue } from '../../../../src/rollout/executors/slurm.ts';
import {
  exitStatus,
  mergeScript,
  quote,
  shardPlan,
  shardScript,
  writeShardJobs,
} from '../../../../src/rollout/executors/slurm-scripts.ts';
import { tempDir } from '../../../support/temp.ts';

const tmp = tempDir('polar-slurm-unit-');
after(() => rmSync(tmp, { recursive: true, force: true }));

test('squeue lines: array tasks by index, a pending range, the merge job and its reason', () => {
  const text = [
    '41_[3-4]|PENDING|Resources',
    '41_1|COMPLETED|None',
    '41_2|RUNNING|None',
    '42|PENDING|Dependency',
    '',
    'garbage',
  ].join('\n');
  const s = parseSqueue(text, '41', '42');
  assert.deepEqual(
    [...s.tasks],
    [
      [1, 'COMPLETED'],
      [2, 'RUNNING'],
    ],
  );
  assert.equal(s.pendingRange, true);
  assert.deepEqual(s.merge, { state: 'PENDING', reason: 'Dependency' });
  // another job's id that starts with the array's digits is not one of its tasks
  const other = parseSqueue('410_1|RUNNING|None\n42|PENDING|DependencyNeverSatisfied', '41', '42');
  assert.equal(other.tasks.size, 0);
  assert.equal(other.merge?.reason, 'DependencyNeverSatisfied');
});

/** A Slurm job of two instances, two samples each, 3 at once per shard, 5 shards asked for. */
const slurmJob = (out: string, polar: string): SlurmJob => ({
  v: ROLLOUT_JOB_VERSION,
  dataset: join(tmp, "my data's.jsonl"),
  split: 'test',
  instances: ['a', 'b'],
  samples: 2,
  setup: {
    agent: { agent: 'pi', backend: { kind: 'vllm', url: 'http://10.0.0.2:8000/v1', model: 'm' } },
    runtime: { kind: 'sandbox', repos: 'fixtures/swe/repos' },
  },
  grader: { kind: 'polar' },
  gradeEmpty: false,
  rejectTampering: false,
  agentTimeoutMs: 60_000,
  testTimeoutMs: 60_000,
  concurrency: 3,
  out,
  resume: false,
  overwrite: false,
  settings: { '--agent-timeout': 60 },
  executor: { kind: 'slurm', cpus: 1, memoryBytes: 2 ** 30, shards: 5, sbatch: [], polar: [polar] },
});

test("a shard script runs polar on its shard's job, writes its exit status and tags its results", async () => {
  const recorder = join(tmp, 'fake-polar.sh');
  // a stand-in polar: records one argument a line, then exits with FAKE_RC
  writeFileSync(recorder, `#!/bin/bash\nprintf '%s\\n' "$@" > "$ARGS_FILE"\nexit "\${FAKE_RC:-0}"\n`, {
    mode: 0o755,
  });
  const out = join(tmp, 'run out');
  const job = slurmJob(out, recorder);
  const instances = [{ instance_id: 'a' }, { instance_id: 'b' }] as SweInstance[];
  const plan = shardPlan(job, instances);
  assert.equal(plan.shards, 2, 'never more shards than instances');
  mkdirSync(plan.logs, { recursive: true }); // made by polar before it submits
  await writeShardJobs(plan, job);
  const script = join(tmp, 'shard.sh');
  writeFileSync(script, shardScript(plan, '2'), { mode: 0o755 });
  const run = (rc: number) =>
    spawnSync('bash', [script], {
      env: {
        ...process.env,
        ARGS_FILE: join(tmp, 'args'),
        FAKE_RC: String(rc),
        SLURMD_NODENAME: 'n7',
        SLURM_JOB_ID: '99',
      },
      encoding: 'utf8',
    });
  const ok = run(0);
  assert.equal(ok.status, 0, ok.stderr);
  const args = readFileSync(join(tmp, 'args'), 'utf8').trimEnd().split('\n');
  assert.deepEqual(args.slice(0, 2), ['job', plan.jobFile(2)]);
  const at = (flag: string) => args[args.indexOf(flag) + 1];
  assert.deepEqual(JSON.parse(at('--cluster-tag')!), { engine: 'slurm', node: 'n7', job_id: '99', shard: 2 });
  // the shard's job: its share of the selection into its own folder, resumed, on the node's pool, no probe
  const shard = readJob(plan.jobFile(2));
  assert.deepEqual(shard.shard, { index: 2, count: 2 });
  assert.equal(shard.out, join(out, '.cluster', 'shards', 'shard-2'));
  assert.deepEqual(shard.instances, ['a', 'b']);
  assert.equal(shard.concurrency, 3);
  assert.equal(shard.resume, true);
  assert.deepEqual(shard.executor, { kind: 'local' });
  assert.equal(shard.setup.agent.backend?.skipCheck, true);
  assert.deepEqual(shard.settings, job.settings);
  assert.equal(statSync(plan.jobFile(2)).mode & 0o777, 0o600, 'a job may hold a URL with credentials');
  assert.equal(exitStatus(plan.exitFile(2)), 0);
  // a failed polar: the script exits with its status and the exit file says so
  const bad = run(3);
  assert.equal(bad.status, 3);
  assert.equal(exitStatus(plan.exitFile(2)), 3);
  assert.equal(exitStatus(plan.exitFile(1)), undefined);
  // the merge job names every shard folder, the run's folder and selection
  assert.ok(mergeScript(plan).includes(` job ${quote(plan.mergeJobFile)}`));
  const merge = readJob(plan.mergeJobFile);
  assert.deepEqual(merge.merge, [plan.shardDir(1), plan.shardDir(2)]);
  assert.equal(merge.out, plan.out);
  assert.deepEqual(merge.instances, ['a', 'b']);
  assert.equal(merge.samples, 2);
});
