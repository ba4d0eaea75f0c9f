/**
 * Defaults by purpose (issue 45): training rejects tampering, evaluation keeps the official outcome.
 * polar loop and polar gym grade a flagged sample 0 unless --no-reject-test-tampering; polar eval keeps
 * the official outcome unless --reject-test-tampering; a loop step's rollout job on a cluster carries
 * the loop's choice (the job's executor grades as the job says, whatever polar eval's default).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { evalJob, evaluationSetup } from '../../../src/eval/job.ts';
import { runSettings } from '../../../src/eval/settings.ts';
import { stepJob } from '../../../src/loop/cluster.ts';
import { loopOptions } from '../../../src/loop/command.ts';
import { loopEvaluation } from '../../../src/loop/phases.ts';
import { DEFAULTS } from '../../../src/options/defaults.ts';
import { settingsDiff } from '../../../src/rollout/run/settings.ts';
import { loopArgv, parseArgv } from '../../support/argv.ts';

test('the defaults: training rejects, evaluation does not', () => {
  assert.equal(DEFAULTS.trainingRejectsTampering.value, true);
  assert.equal(DEFAULTS.evalRejectsTampering.value, false);
});

test('polar loop and polar gym: on unless --no-reject-test-tampering; polar eval: off unless --reject-test-tampering', () => {
  const flag = (argv: string[]) => parseArgv(argv).flags.rejectTestTampering;
  assert.equal(flag(loopArgv()), undefined);
  assert.equal(flag(loopArgv(['--no-reject-test-tampering'])), false);
  assert.equal(flag(loopArgv(['--reject-test-tampering'])), true);
  const gym = ['gym', '--backend', 'vllm', '--backend-url', 'http://127.0.0.1:1/v1', '--model', 'm'];
  assert.equal(flag(gym), undefined);
  assert.equal(flag([...gym, '--no-reject-test-tampering']), false);
  assert.equal(flag([...gym, '--reject-test-tampering']), true);
  const evalArgv = ['eval', '--dataset', 'd.jsonl', '--agent', 'gold', '--out', '/tmp/x'];
  assert.equal(flag(evalArgv), undefined);
  assert.equal(flag([...evalArgv, '--reject-test-tampering']), true);
  // the loop passes on only what was said; its evaluations apply the training default
  const said = (argv: string[]) => loopOptions(parseArgv(argv).flags as never);
  assert.equal(said(loopArgv()).rejectTestTampering, undefined);
  assert.equal(said(loopArgv(['--no-reject-test-tampering'])).rejectTestTampering, false);
});

test("polar eval's job keeps the official outcome unless told; a loop step's cluster job rejects unless told", () => {
  const evalArgv = ['eval', '--dataset', 'd.jsonl', '--agent', 'gold', '--out', '/tmp/x'];
  const job = (argv: string[]) => {
    const f = parseArgv(argv).flags as never;
    const instances = [{ instance_id: 'a__b-1' }] as never;
    return evalJob(f, evaluationSetup(f), instances, runSettings(f));
  };
  assert.equal(job(evalArgv).rejectTampering, false);
  assert.equal(job([...evalArgv, '--reject-test-tampering']).rejectTampering, true);
  // it decides results: --resume refuses to continue a run graded the other way
  const settings = (argv: string[]) => runSettings(parseArgv(argv).flags as never);
  assert.deepEqual(settingsDiff(settings(evalArgv), settings([...evalArgv, '--reject-test-tampering'])), [
    '--reject-test-tampering',
  ]);
  assert.deepEqual(
    settingsDiff(settings(evalArgv), settings([...evalArgv, '--no-reject-test-tampering'])),
    [],
  );

  const cluster = ['--runtime', 'local', '--cluster', 'ray=10.0.0.1:6379'];
  const run = {
    instanceIds: ['a__b-1'],
    samples: 2,
    out: '/o',
    dataset: 'd.jsonl',
    concurrency: 1,
    meta: {},
    quiet: true,
  };
  const step = (more: string[]) => {
    const o = loopOptions(parseArgv(loopArgv([...cluster, ...more])).flags as never);
    assert.ok(o.cluster);
    return stepJob(loopEvaluation(o), o, o.cluster, run).rejectTampering;
  };
  assert.equal(step([]), true);
  assert.equal(step(['--no-reject-test-tampering']), false);
});
