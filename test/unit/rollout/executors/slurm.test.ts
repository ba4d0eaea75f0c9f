/**
 * The Slurm side of `polar eval --cluster slurm` without a cluster: squeue's lines read into states (the
 * shapes squeue 22.05 prints for an array job: `ID_[2-4]` while tasks are pending as one record, `ID_N`
 * once a task is on its own), and the shard script run by bash with a stand-in polar that records its
 * arguments: words quoted so bash gives them back unchanged, the exit file, the node tag. The real
 * engine: test/e2e/cluster-slurm.test.ts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { EvalFlags } from '../../../../src/eval/flags.ts';
import type { SweInstance } from '../../../../src/rollout/dataset.ts';
import { parseSqueue } from '../../../../src/rollout/executors/slurm.ts';
import {
  exitStatus,
  mergeScript,
  quote,
  shardPlan,
  shardScript,
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

const flags = (out: string, polar: string): EvalFlags =>
  ({
    out,
    dataset: join(tmp, "my data's.jsonl"),
    split: 'test',
    samples: 2,
    concurrency: 3,
    instances: ['a', 'b'],
    clusterPolar: polar,
    clusterShards: 5,
  }) as unknown as EvalFlags;

test('a shard script runs polar with its words unchanged, writes its exit status and tags its results', () => {
  const recorder = join(tmp, 'fake-polar.sh');
  // a stand-in polar: records one argument a line, then exits with FAKE_RC
  writeFileSync(recorder, `#!/bin/bash\nprintf '%s\\n' "$@" > "$ARGS_FILE"\nexit "\${FAKE_RC:-0}"\n`, {
    mode: 0o755,
  });
  const out = join(tmp, 'run out');
  const argv = [
    'node',
    'polar',
    'eval',
    '--dataset',
    "my data's.jsonl",
    '--agent-timeout',
    '60',
    '--out',
    out,
  ];
  const f = flags(out, recorder);
  const instances = [{ instance_id: 'a' }, { instance_id: 'b' }] as SweInstance[];
  const plan = shardPlan(f, instances, argv);
  assert.equal(plan.shards, 2, 'never more shards than instances');
  mkdirSync(plan.logs, { recursive: true }); // made by polar before it submits
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
  assert.deepEqual(args.slice(0, 5), ['eval', '--dataset', "my data's.jsonl", '--agent-timeout', '60']);
  const at = (flag: string) => args[args.indexOf(flag) + 1];
  assert.equal(at('--shard'), '2/2');
  assert.equal(at('--out'), join(out, '.cluster', 'shards', 'shard-2'));
  assert.equal(at('--instances'), 'a,b');
  assert.equal(at('--concurrency'), '3');
  assert.ok(args.includes('--resume') && args.includes('--skip-backend-check'));
  assert.deepEqual(JSON.parse(at('--cluster-tag')!), { engine: 'slurm', node: 'n7', job_id: '99', shard: 2 });
  assert.equal(exitStatus(plan.exitFile(2)), 0);
  // a failed polar: the script exits with its status and the exit file says so
  const bad = run(3);
  assert.equal(bad.status, 3);
  assert.equal(exitStatus(plan.exitFile(2)), 3);
  assert.equal(exitStatus(plan.exitFile(1)), undefined);
  // the merge script names every shard folder and the run's selection
  const merge = mergeScript(plan, f);
  assert.match(merge, / eval --merge .*shard-1'? .*shard-2'? --dataset /);
  assert.ok(merge.includes(`--out ${quote(out)}`));
  assert.ok(merge.includes('--instances a,b'));
});
