/**
 * A step of `polar loop --max-staleness K` reports what a strict step reports (src/loop/async-loop.ts,
 * src/loop/observe.ts), checked on hand-written group folders and a stand-in writer, no training: the
 * batch's groups read back as one evaluation (a resumed sample's latest line only), the rollout health
 * counted per GRPO group even when two groups of the batch share a task, its warnings in words, the
 * rollout, health and staleness figures at the loop's step, the health accepted by step.json; and the
 * step's train request forwards the trainer's optimiser steps to the writer at their own step, with the
 * staleness check's policy_version and max_staleness and the previous step's run to continue.
 */
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { batchOutcome, trainRequest } from '../../../src/loop/async-loop.ts';
import { groupDirName, LOOP_FILES, stepDirName, stepSummarySchema } from '../../../src/loop/files.ts';
import type { LoopOptions } from '../../../src/loop/loop.ts';
import { observeStep } from '../../../src/loop/observe.ts';
import { EVAL_FILES } from '../../../src/rollout/run/files.ts';
import { buildReport, type ResultLine } from '../../../src/rollout/run/report.ts';
import { CHECKPOINT_FILES } from '../../../src/train/schema.ts';
import type { Axis, Reporter } from '../../../src/train/tracking/reporter.ts';
import { emptyStats } from '../../../src/trajectory/stats.ts';
import { resultLine } from '../../support/results.ts';
import { tempDir } from '../../support/temp.ts';

const tmp = tempDir('polar-async-steps-');
after(() => rmSync(tmp, { recursive: true, force: true }));

/** a sample of 2 model calls that took a second */
const result = (task: string, sample: number, reward: number | null): ResultLine =>
  resultLine(task, sample, reward, { calls: 2, seconds: 1 });

/** groups/g-NNNNNN/ as polar eval leaves it: results.jsonl line by line, report.json over them. */
function groupDir(out: string, group: number, lines: ResultLine[]): string {
  const dir = join(out, LOOP_FILES.groups, groupDirName(group));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, EVAL_FILES.results), lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
  const latest = new Map(lines.map((l) => [`${l.instance_id}/${l.sample}`, l]));
  const report = buildReport([...latest.values()], {
    dataset: 'train.jsonl',
    agent: 'pi',
    model: 'm',
    runtime: 'local',
    instances: [lines[0]!.instance_id],
    samples: 2,
  });
  writeFileSync(join(dir, EVAL_FILES.report), `${JSON.stringify(report)}\n`);
  return dir;
}

function standInWriter(): Reporter & {
  points: Array<{ axis: Axis; step: number; values: Record<string, unknown> }>;
} {
  const points: Array<{ axis: Axis; step: number; values: Record<string, unknown> }> = [];
  return {
    points,
    log(axis, step, values) {
      points.push({ axis, step, values });
    },
    close: async () => {},
    discard: async () => {},
  };
}

describe('a step of the asynchronous loop reports as a strict step does', () => {
  test('health per GRPO group of the batch, its warnings, and its figures at the loop step', async () => {
    const out = join(tmp, 'health');
    // groups 3 and 5 share task a (3 carried from step 1, 5 fresh): 3 all solved, 5 mixed;
    // group 5's sample 1 failed first and was graded again after a resume (the latest line counts)
    const batch = {
      groups: [
        { group: 3, task: 'a', meantFor: 1, versions: [0, 0] },
        { group: 5, task: 'a', meantFor: 2, versions: [1, 1] },
        { group: 6, task: 'b', meantFor: 2, versions: [1, 1] },
      ],
    };
    const dirs = [
      groupDir(out, 3, [result('a', 0, 1), result('a', 1, 1)]),
      groupDir(out, 5, [result('a', 0, 1), result('a', 1, null), result('a', 1, 0)]),
      groupDir(out, 6, [result('b', 0, 0), result('b', 1, null)]),
    ];
    const rollouts = await batchOutcome(batch, dirs, 2);
    assert.equal(rollouts.results.length, 6, 'one result per sample: the resumed sample once');
    assert.equal(rollouts.report.total, 6);
    assert.equal(rollouts.report.counts.resolved, 3);
    assert.equal(rollouts.report.counts.error, 1);
    assert.equal(rollouts.report.dataset, 'train.jsonl');
    assert.deepEqual(
      rollouts.results.map(rollouts.groupOf),
      ['3', '3', '5', '5', '6', '6'],
      'each result names its group',
    );

    const stats = { ...emptyStats(), trajectories_written: 5, traces_written: 5, calls_used: 10 };
    const record = {
      step: 2,
      staleness: { max: 1, mean: 0.5, carried: 2, dropped: 0 },
    } as Record<string, unknown>;
    const writer = standInWriter();
    const health = observeStep(writer, 2, {
      record,
      rollouts,
      stats,
      heldout: null,
      groupOf: rollouts.groupOf,
    });
    // by task there would be 2 groups (a: 1,1,1,0 has a signal); by GRPO group there are 3, two uniform
    assert.equal(health.groups, 3);
    assert.equal(health.groups_no_signal, 2);
    assert.equal(health.groups_all_solved, 1);
    assert.equal(health.groups_all_failed, 1);
    assert.equal(health.infra_errors, 1);
    assert.equal(health.failed_calls, 2);
    assert.equal(health.staleness, 0.5);
    assert.ok(health.warnings.some((w) => /67% of groups have equal rewards/.test(w)));
    assert.ok(health.warnings.some((w) => /1 sample ended in an infrastructure error/.test(w)));
    assert.ok(health.warnings.some((w) => /of model calls failed \(2 of 12\)/.test(w)));

    assert.equal(writer.points.length, 1);
    const [point] = writer.points;
    assert.equal(point!.axis, 'loop');
    assert.equal(point!.step, 2);
    assert.equal(point!.values['health/no_signal_share'], 2 / 3);
    assert.equal(point!.values['health/infra_errors'], 1);
    assert.equal(point!.values['health/staleness'], 0.5);
    assert.equal(point!.values['rollout/staleness'], 0.5);
    assert.equal(point!.values['rollout/samples'], 6);
    assert.equal(point!.values['rollout/resolved'], 3);
    assert.equal(point!.values['rollout/trajectories'], 5);

    // step.json takes the health as the strict loop writes it
    const summary = {
      step: 2,
      status: 'done',
      started_at: new Date(0).toISOString(),
      ended_at: new Date(0).toISOString(),
      policy: 'step-1',
      checkpoint: '/c',
      tasks: ['a', 'a', 'b'],
      rollouts: { pass_at_1: rollouts.report.pass_at_1.mean, samples: 6 },
      heldout: null,
      trajectories: 5,
      trainable_tokens: 0,
      staleness: record.staleness,
      health,
    };
    assert.equal(stepSummarySchema.safeParse(summary).success, true);
  });

  test("the train request: the trainer's steps to the writer, the staleness check, the run it continues", () => {
    const out = join(tmp, 'train');
    const o = {
      backend: { kind: 'vllm', model: 'served' },
      trainFlags: { lr: 1e-6, device: 'cpu' },
      groupSize: 4,
      maxStaleness: 2,
    } as unknown as LoopOptions;
    const writer = standInWriter();
    const batch = {
      step: 3,
      groups: [
        { group: 4, task: 'a', meantFor: 2, versions: [1, 1, 1, 1] },
        { group: 7, task: 'b', meantFor: 3, versions: [2, 2, 2, 2] },
      ],
    };
    const fresh = trainRequest(o, { out, reporter: writer }, batch, '/t.jsonl', '/ckpt-2');
    assert.equal(fresh.trajectories, '/t.jsonl');
    assert.equal(fresh.out, join(out, stepDirName(3), LOOP_FILES.train));
    assert.deepEqual(fresh.sampledBy, ['served']);
    assert.equal(fresh.resume, undefined, 'step 2 left no checkpoint: a new run from the policy');
    assert.deepEqual(fresh.flags, {
      lr: 1e-6,
      device: 'cpu',
      model: '/ckpt-2',
      batch_rollouts: 8,
      epochs: 1,
      policy_version: 2,
      max_staleness: 2,
    });

    // the trainer's step events (the worker's `step` lines) go to the writer's train axis at their step
    assert.ok(fresh.onStep, 'the request forwards the trainer steps');
    fresh.onStep({ event: 'step', step: 3, loss: 0.25, lr: 1e-6, kl: null });
    assert.deepEqual(writer.points, [
      { axis: 'train', step: 3, values: { 'train/loss': 0.25, 'train/lr': 1e-6 } },
    ]);

    // with step 2's run on disk, step 3 continues it (its weights and optimiser) instead of the model
    const previous = join(out, stepDirName(2), LOOP_FILES.train);
    mkdirSync(join(previous, CHECKPOINT_FILES.latest), { recursive: true });
    const next = trainRequest(o, { out, reporter: writer }, batch, '/t.jsonl', '/ckpt-2');
    assert.equal(next.resume, previous);
    assert.equal((next.flags as Record<string, unknown>).model, undefined);
  });
});
