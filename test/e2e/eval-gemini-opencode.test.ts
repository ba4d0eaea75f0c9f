/**
 * `polar eval` with Gemini CLI and with OpenCode: one fixture task each under polar's capture proxy (local
 * runtime, the harness started the way eval starts it: Gemini CLI's bundle under node, OpenCode's native
 * binary as it is), the stand-in model "fixes" it through the harness's shell tool, polar grades the diff
 * and `polar build` yields a rewarded trajectory. A down backend is an error, never a score.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { CallRecord } from '../../src/capture/record.ts';
import { readRecords } from '../support/capture-run.ts';
import { closedUrl } from '../support/cli.ts';
import { buildFolder, evalTask, goldPatchStandin } from '../support/eval-cli.ts';
import type { Standin } from '../support/vllm-standin.ts';

const SHELL: Record<string, string> = { gemini: 'run_shell_command', opencode: 'bash' };

describe('polar eval with Gemini CLI and OpenCode', () => {
  let standin: Standin;
  before(async () => {
    // a side call (OpenCode's title) has no tools
    standin = await goldPatchStandin(
      (body) => body.tools?.find((t) => Object.values(SHELL).includes(t.function.name))?.function.name,
      'Fix jsutil',
    );
  });
  after(() => standin.close());

  for (const harness of ['gemini', 'opencode']) {
    test(`${harness}: one task end to end, resolved, and it builds with its reward`, async () => {
      const r = await evalTask(harness, standin.url, ['--json']);
      const { results } = r;
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(JSON.parse(r.stdout).pass_at_1.mean, 1);
      assert.equal(results.length, 1);
      assert.equal(results[0]!.resolved, true);
      const recs = await readRecords(results[0]!.capture);
      const calls = recs.filter((x): x is CallRecord => x.type === 'call');
      assert.ok(calls.every((c) => c.api === (harness === 'gemini' ? 'gemini' : 'openai-chat')));
      // the prompt reached the model as polar rendered it (OpenCode would quote a message word holding spaces)
      const first = calls.find((c) => c.harness_meta.request_kind === undefined)!;
      const prompt = JSON.stringify(first.canonical_request);
      assert.match(prompt, /"text":"<pr_description>\\n/, 'the prompt, unquoted, starts the user turn');
      assert.equal(recs.at(-1)?.type, 'grading');
      const { built, trajectories } = await buildFolder(r.out);
      assert.equal(built.exitCode, 0, built.stderr);
      assert.equal(trajectories.length, 1);
      assert.equal(trajectories[0]!.reward, 1);
    });
  }

  test('gemini: a down backend is an error, not a 0% score, after one retry of its own', async () => {
    const { exitCode, stderr, results } = await evalTask('gemini', await closedUrl(), [
      '--skip-backend-check',
      '--agent-timeout',
      '180',
    ]);
    assert.equal(exitCode, 1, stderr);
    assert.match(stderr, /all 1 sample ended in an error/);
    assert.equal(results[0]!.status, 'error');
    assert.equal(results[0]!.reward, null);
    // general.maxAttempts 2: the first call and one retry, each answered 502 in Google's shape
    const calls = (await readRecords(results[0]!.capture)).filter((x): x is CallRecord => x.type === 'call');
    assert.equal(calls.length, 2, JSON.stringify(calls.map((c) => c.error)));
    for (const c of calls) {
      assert.equal(c.response.status, 502);
      assert.equal((c.response.body as { error: { status: string } }).error.status, 'UNAVAILABLE');
    }
  });
});
