/**
 * `polar eval` with a real harness: Pi runs one fixture task under polar's capture proxy (local runtime),
 * the stand-in model "fixes" it through Pi's bash tool, polar takes the diff, grades it, and appends a
 * grading record to the capture, so `polar build` yields a rewarded trajectory with no extra step.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { CaptureRecord } from '../../src/capture/record.ts';
import { readRecords } from '../support/capture-run.ts';
import { closedUrl } from '../support/cli.ts';
import { buildFolder, evalTask, goldPatchStandin, TASK } from '../support/eval-cli.ts';
import type { Standin } from '../support/vllm-standin.ts';

describe('polar eval with Pi', () => {
  let standin: Standin;
  before(async () => {
    standin = await goldPatchStandin(() => 'bash');
  });
  after(() => standin.close());

  test('one task end to end: capture with a grading record, resolved, and it builds with its reward', async () => {
    const r = await evalTask('pi', standin.url, ['--pi-api', 'openai-responses', '--json'], 240_000);
    assert.equal(r.exitCode, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    assert.equal(report.pass_at_1.mean, 1);
    const results = r.results;
    assert.equal(results.length, 1);
    assert.equal(results[0]!.resolved, true);
    const captureFile = results[0]!.capture;
    assert.ok(captureFile, 'the result names its capture file');
    const records = await readRecords(captureFile);
    const types = records.map((x) => x.type);
    assert.equal(types[0], 'session');
    assert.ok(types.filter((t) => t === 'call').length >= 2, 'tool call and final answer');
    const calls = records.filter((x): x is Extract<CaptureRecord, { type: 'call' }> => x.type === 'call');
    assert.ok(
      calls.every((c) => c.api === 'openai-responses'),
      '--pi-api reached the harness profile',
    );
    assert.equal(types.at(-1), 'grading');
    const grading = records.at(-1) as Extract<CaptureRecord, { type: 'grading' }>;
    assert.equal(grading.resolved, true);
    assert.equal(grading.reward, 1);
    assert.equal(grading.task_id, TASK);

    // the eval folder builds straight into rewarded trajectories
    const { built, trajectories } = await buildFolder(r.out);
    assert.equal(built.exitCode, 0, built.stderr);
    assert.equal(trajectories.length, 1);
    assert.equal(trajectories[0]!.reward, 1);
    assert.equal(trajectories[0]!.task_id, TASK);
  });

  test('a down backend is an error, not a 0% score: exit 1, no reward, and --resume runs it again', async () => {
    const r = await evalTask(
      'pi',
      await closedUrl(),
      // the calls failing inside the run is the test (the set-up probe would stop it first, exit 4)
      ['--agent-timeout', '120', '--skip-backend-check'],
      240_000,
    );
    assert.equal(r.exitCode, 1, r.stderr);
    assert.match(r.stderr, /the evaluation failed: all 1 sample ended in an error/);
    assert.match(r.stderr, /no model answer/);
    const [line] = r.results;
    assert.equal(line!.status, 'error');
    assert.equal(line!.reward, null);
    assert.ok(
      line!.agent.calls > 0 && line!.agent.failed_calls === line!.agent.calls,
      JSON.stringify(line!.agent),
    );
    const again = await r.again(['--resume']);
    assert.equal(again.exitCode, 1, again.stderr);
    assert.doesNotMatch(again.stderr, /already graded/);
  });
});
