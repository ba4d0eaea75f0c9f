/**
 * Rollout health (src/loop/health.ts) and the tracker figures (src/train/tracking/figures.ts, src/rollout/run/figures.ts) over hand-made
 * results and build reports: each share counted from its records, each threshold's warning in words, the
 * step record's fields (overlong, staleness) read only when present, and step.json accepting the result.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { stepSummarySchema } from '../../../src/loop/files.ts';
import { formatHealth, HEALTH_THRESHOLDS, healthFigures, stepHealth } from '../../../src/loop/health.ts';
import { reportTargets } from '../../../src/options/parsers.ts';
import { reportSetup } from '../../../src/options/report.ts';
import { evalFigures } from '../../../src/rollout/run/figures.ts';
import type { Report, ResultLine } from '../../../src/rollout/run/report.ts';
import { buildReport } from '../../../src/rollout/run/report.ts';
import { buildFigures, quantile, trainFigures } from '../../../src/train/tracking/figures.ts';
import { emptyStats } from '../../../src/trajectory/stats.ts';
import { resultLine } from '../../support/results.ts';

/** a sample of 4 model calls; sample k took k + 1 seconds */
const result = (task: string, sample: number, reward: number | null, extra: Partial<ResultLine> = {}) =>
  resultLine(task, sample, reward, { calls: 4, seconds: sample + 1 }, extra);

function reportOf(results: ResultLine[], samples: number): Report {
  const ids = [...new Set(results.map((r) => r.instance_id))];
  return buildReport(results, {
    dataset: 'd',
    agent: 'a',
    model: 'm',
    runtime: 'local',
    instances: ids,
    samples,
  });
}

describe('rollout health', () => {
  test('groups without learning signal: all rewards equal, split into all solved and all failed', () => {
    const results = [
      ...[0, 1, 2, 3].map((s) => result('solved', s, 1)),
      ...[0, 1, 2, 3].map((s) => result('failed', s, 0)),
      ...[0, 1, 2, 3].map((s) => result('also-failed', s, 0)),
      ...[0, 1, 2, 3].map((s) => result('mixed', s, s % 2)),
    ];
    const h = stepHealth({ results, stats: emptyStats() });
    assert.equal(h.groups, 4);
    assert.equal(h.groups_no_signal, 3);
    assert.equal(h.groups_all_solved, 1);
    assert.equal(h.groups_all_failed, 2);
    assert.equal(h.no_signal_share, 0.75);
    assert.ok(h.no_signal_share >= HEALTH_THRESHOLDS.noSignalShare);
    assert.match(
      h.warnings[0]!,
      /^75% of groups have equal rewards \(1 all solved, 2 all failed\): raise --group-size or pick easier tasks$/,
    );
  });

  test('mostly solved groups ask for harder tasks; a healthy step has no warning', () => {
    const easy = [
      ...[0, 1].map((s) => result('a', s, 1)),
      ...[0, 1].map((s) => result('b', s, 1)),
      ...[0, 1].map((s) => result('c', s, s)),
    ];
    assert.match(stepHealth({ results: easy, stats: emptyStats() }).warnings[0]!, /pick harder tasks/);
    const fine = [0, 1, 2, 3].map((s) => result('a', s, s % 2));
    const stats = { ...emptyStats(), calls_used: 100, traces_written: 10 };
    assert.deepEqual(stepHealth({ results: fine, stats }).warnings, []);
  });

  test('drift, truncation, failed calls, infrastructure errors and unparsed tool calls from their records', () => {
    const results = [result('a', 0, 1), result('a', 1, 0), result('a', 2, null)];
    const stats = {
      ...emptyStats(),
      calls_used: 40,
      calls_inexact: { 'retokenized text': 3, 'no logprobs': 1 },
      traces_written: 10,
      truncations: { max_tokens: 2 },
      calls_tool_unparsed: 5,
    };
    const h = stepHealth({ results, stats });
    assert.equal(h.drift_rate, 4 / 40);
    assert.deepEqual(h.drift_by_cause, { 'retokenized text': 3, 'no logprobs': 1 });
    assert.equal(h.truncated_traces, 2);
    assert.equal(h.truncated_share, 0.2);
    assert.equal(h.model_calls, 12);
    assert.equal(h.failed_calls, 4);
    assert.equal(h.failed_call_rate, 4 / 12);
    assert.equal(h.infra_errors, 1);
    assert.equal(h.tool_calls_unparsed, 5);
    const text = h.warnings.join('\n');
    assert.match(text, /10% of model calls are not token-exact \(retokenized text 3, no logprobs 1\)/);
    assert.match(text, /20% of traces were truncated \(max_tokens 2\)/);
    assert.match(text, /33% of model calls failed \(4 of 12\): check the inference server/);
    assert.match(text, /1 sample ended in an infrastructure error and got no reward/);
    assert.match(text, /5 model calls held a tool call the server did not parse/);
    assert.match(
      formatHealth(h),
      /token drift 10%, truncated traces 2, failed calls 33%, infra errors 1, unparsed tool calls 5/,
    );
    const figures = healthFigures(h);
    assert.equal(figures['health/token_drift_rate'], 0.1);
    assert.equal(figures['health/drift/retokenized_text'], 3);
    assert.equal(figures['health/truncated/max_tokens'], 2);
  });

  test('flagged samples: counted, the proven ones apart, listed with their evidence, warned about', () => {
    const canary = {
      layer: 'canary' as const,
      reason: 'a canary passed',
      tests: ['t::c: PASSED'],
      proof: true,
    };
    const scan = { layer: 'runner-access' as const, file: 'pkg/x.py', line: 3, reason: 'imports pytest' };
    const results = [
      result('a', 0, 0, {
        tampering: { files: [], reason: 'a canary passed', rejected: true, proven: true, findings: [canary] },
      }),
      result('a', 1, 0, {
        tampering: {
          files: ['pkg/x.py'],
          reason: 'imports pytest',
          rejected: true,
          proven: false,
          findings: [scan],
        },
      }),
      result('a', 2, 1),
    ];
    const h = stepHealth({ results, stats: emptyStats() });
    assert.equal(h.flagged, 2);
    assert.equal(h.tampering_proven, 1);
    assert.deepEqual(h.flagged_samples, [
      {
        instance_id: 'a',
        sample: 0,
        proven: true,
        rejected: true,
        evidence: ['proof: a canary passed (t::c: PASSED)'],
      },
      {
        instance_id: 'a',
        sample: 1,
        proven: false,
        rejected: true,
        evidence: ['runner-access: pkg/x.py:3: imports pytest'],
      },
    ]);
    assert.match(
      h.warnings.join('\n'),
      /2 samples flagged by the grading integrity layers \(1 proven tampered with\)/,
    );
    assert.match(formatHealth(h), /flagged 2 \(1 proven\)/);
    assert.equal(healthFigures(h)['health/tampering_proven'], 1);
    assert.equal(stepHealth({ results: [result('b', 0, 1)], stats: emptyStats() }).flagged, 0);
  });

  test('overlong and staleness only when the step record carries them', () => {
    const stats = emptyStats();
    const without = stepHealth({ results: [], stats, record: { step: 1 } });
    assert.equal('overlong' in without, false);
    assert.equal('staleness' in without, false);
    assert.equal(without.no_signal_share, null);
    const withThem = stepHealth({ results: [], stats, record: { overlong: { count: 3 }, staleness: 1.5 } });
    assert.equal(withThem.overlong, 3);
    assert.equal(withThem.staleness, 1.5);
    assert.match(formatHealth(withThem), /overlong 3, staleness 1.5/);
  });

  test('step.json takes the health (and one without it, written before)', () => {
    const base = {
      step: 1,
      status: 'done',
      started_at: 'a',
      ended_at: 'b',
      policy: 'step-0',
      checkpoint: '/c',
      tasks: ['a'],
      rollouts: { pass_at_1: 0.5, samples: 2 },
      heldout: null,
      trajectories: 2,
      trainable_tokens: 10,
    };
    assert.ok(stepSummarySchema.safeParse(base).success);
    const health = stepHealth({ results: [result('a', 0, 1), result('a', 1, 0)], stats: emptyStats() });
    const parsed = stepSummarySchema.parse(JSON.parse(JSON.stringify({ ...base, health })));
    assert.equal(parsed.health?.groups, 1);
  });
});

describe('tracker figures', () => {
  test('the trainer step event as train/ scalars, nulls kept out by the writer', () => {
    const f = trainFigures({
      event: 'step',
      step: 3,
      total_steps: 4,
      loss: 0.5,
      kl: null,
      lr: 1e-6,
      tokens: 40,
    });
    assert.deepEqual(f, { 'train/loss': 0.5, 'train/lr': 1e-6, 'train/tokens': 40 });
  });

  test('an evaluation: pass@1, rewards, statuses, error classes, time per sample, calls per rollout', () => {
    const results = [result('a', 0, 1), result('a', 1, 0), result('a', 2, null), result('a', 3, 0.5)];
    const f = evalFigures('rollout', reportOf(results, 4), results);
    assert.equal(f['rollout/resolved'], 1);
    assert.equal(f['rollout/status/error'], 1);
    assert.equal(f['rollout/errors/no_model_answer'], 1);
    assert.equal(f['rollout/reward_mean'], 0.5);
    assert.ok(Math.abs(f['rollout/reward_std']! - Math.sqrt(1 / 6)) < 1e-12);
    assert.equal(f['rollout/sample_time_s_p50'], 2);
    assert.equal(f['rollout/sample_time_s_p90'], 4);
    assert.equal(f['rollout/sample_time_s_max'], 4);
    assert.equal(f['rollout/model_calls_per_rollout'], 4);
    assert.equal(quantile([], 0.5), null);
  });

  test('a build report: tokens and calls per rollout, truncations, drift by cause', () => {
    const stats = {
      ...emptyStats(),
      trajectories_written: 4,
      tokens_total: 400,
      calls_used: 12,
      truncations: { max_tokens: 1, divergence: 2 },
      calls_inexact: { 'no token ids': 2 },
    };
    const f = buildFigures(stats);
    assert.equal(f['rollout/tokens_per_rollout'], 100);
    assert.equal(f['rollout/calls_per_rollout'], 3);
    assert.equal(f['rollout/truncated_traces'], 3);
    assert.equal(f['rollout/drift/no_token_ids'], 2);
  });
});

describe('--report-to and its companions', () => {
  test('parsed once: a list, none, or an error naming the word', () => {
    assert.deepEqual(reportTargets('tensorboard,wandb'), ['tensorboard', 'wandb']);
    assert.deepEqual(reportTargets('wandb,wandb'), ['wandb']);
    assert.deepEqual(reportTargets('none'), []);
    assert.throws(() => reportTargets('mlflow'), /mlflow is not one of tensorboard, wandb, none/);
  });

  test('resolved against the run folder; flags without --report-to are refused', () => {
    assert.equal(reportSetup({}, '/tmp/run'), null);
    assert.deepEqual(reportSetup({ reportTo: ['tensorboard', 'wandb'] }, '/tmp/run'), {
      tensorboard: { dir: '/tmp/run/tensorboard' },
      wandb: { project: 'polar', name: 'run', dir: '/tmp/run' },
    });
    assert.deepEqual(reportSetup({ reportTo: ['wandb'], project: 'p', runName: 'n' }, '/tmp/run')?.wandb, {
      project: 'p',
      name: 'n',
      dir: '/tmp/run',
    });
    assert.throws(() => reportSetup({ project: 'p' }, '/tmp/run'), /--project is for a run that reports/);
    assert.throws(
      () => reportSetup({ reportTo: ['wandb'], tensorboardDir: '/x' }, '/tmp/run'),
      /--tensorboard-dir is for --report-to tensorboard/,
    );
  });
});
