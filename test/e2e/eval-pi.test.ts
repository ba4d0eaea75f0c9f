/**
 * `polar eval` with a real harness: Pi runs one fixture task under polar's capture proxy (local runtime),
 * the stand-in model "fixes" it through Pi's bash tool, polar takes the diff, grades it, and appends a
 * grading record to the capture, so `polar build` yields a rewarded trajectory with no extra step.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readCapture } from '../../src/capture/reader.ts';
import type { CaptureRecord } from '../../src/capture/record.ts';
import { privateDirs, privateEnv } from '../support/capture-run.ts';
import { closedUrl, ROOT, runPolar } from '../support/cli.ts';
import { fixtureTask } from '../support/fixture-task.ts';
import { type Standin, startStandin } from '../support/vllm-standin.ts';

const TASK = 'polar-fixtures__jsutil-5';

describe('polar eval with Pi', () => {
  let standin: Standin;
  let goldPatch: string;
  before(async () => {
    goldPatch = String((await fixtureTask(TASK)).patch);
    standin = await startStandin({
      policy: (body) => {
        if (body.messages.at(-1)?.role === 'tool') return { content: 'The fix is in place.' };
        const b64 = Buffer.from(goldPatch).toString('base64');
        return {
          toolCalls: [{ name: 'bash', arguments: { command: `echo ${b64} | base64 -d | git apply` } }],
        };
      },
    });
  });
  after(() => standin.close());

  test('one task end to end: capture with a grading record, resolved, and it builds with its reward', async () => {
    const { home, workdir } = await privateDirs();
    const out = join(workdir, 'eval-out');
    const r = await runPolar(
      [
        'eval',
        '--dataset',
        join(ROOT, 'fixtures/swe/mini.jsonl'),
        '--instances',
        TASK,
        '--agent',
        'pi',
        '--pi-api',
        'openai-responses',
        '--runtime',
        'local',
        '--allow-unsandboxed',
        '--repos',
        join(ROOT, 'fixtures/swe/repos'),
        '--backend',
        'vllm',
        '--backend-url',
        standin.url,
        '--model',
        'Qwen/Qwen3-4B',
        '--out',
        out,
        '--json',
        '--quiet',
      ],
      { cwd: workdir, env: privateEnv(home), extendEnv: false, timeoutMs: 240_000 },
    );
    assert.equal(r.exitCode, 0, String(r.stderr));
    const report = JSON.parse(String(r.stdout));
    assert.equal(report.pass_at_1.mean, 1);
    const results = (await readFile(join(out, 'results.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    assert.equal(results.length, 1);
    assert.equal(results[0].resolved, true);
    const captureFile = results[0].capture as string;
    assert.ok(captureFile, 'the result names its capture file');
    const records: CaptureRecord[] = [];
    for await (const { record } of readCapture(captureFile)) records.push(record);
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
    const built = await runPolar(['build', out]);
    assert.equal(built.exitCode, 0, String(built.stderr));
    const trajectories = String(built.stdout)
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    assert.equal(trajectories.length, 1);
    assert.equal(trajectories[0].reward, 1);
    assert.equal(trajectories[0].task_id, TASK);
  });

  test('a down backend is an error, not a 0% score: exit 1, no reward, and --resume runs it again', async () => {
    const { home, workdir } = await privateDirs();
    const out = join(workdir, 'eval-down');
    const args = [
      'eval',
      '--dataset',
      join(ROOT, 'fixtures/swe/mini.jsonl'),
      '--instances',
      TASK,
      '--harness',
      'pi',
      '--runtime',
      'local',
      '--allow-unsandboxed',
      '--repos',
      join(ROOT, 'fixtures/swe/repos'),
      '--backend-url',
      await closedUrl(),
      '--model',
      'Qwen/Qwen3-4B',
      '--agent-timeout',
      '120',
      '--out',
      out,
      '--quiet',
      // the calls failing inside the run is the test (the set-up probe would stop it first, exit 4)
      '--skip-backend-check',
    ];
    const options = { cwd: workdir, env: privateEnv(home), extendEnv: false, timeoutMs: 240_000 };
    const r = await runPolar(args, options);
    assert.equal(r.exitCode, 1, String(r.stderr));
    assert.match(String(r.stderr), /the evaluation failed: all 1 sample ended in an error/);
    assert.match(String(r.stderr), /no model answer/);
    const [line] = (await readFile(join(out, 'results.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    assert.equal(line.status, 'error');
    assert.equal(line.reward, null);
    assert.ok(
      line.agent.calls > 0 && line.agent.failed_calls === line.agent.calls,
      JSON.stringify(line.agent),
    );
    const again = await runPolar([...args, '--resume'], options);
    assert.equal(again.exitCode, 1, String(again.stderr));
    assert.doesNotMatch(String(again.stderr), /already graded/);
  });
});
