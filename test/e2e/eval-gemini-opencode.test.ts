/**
 * `polar eval` with Gemini CLI and with OpenCode: one fixture task each under polar's capture proxy (local
 * runtime, the harness started the way eval starts it: Gemini CLI's bundle under node, OpenCode's native
 * binary as it is), the stand-in model "fixes" it through the harness's shell tool, polar grades the diff
 * and `polar build` yields a rewarded trajectory. A down backend is an error, never a score.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { execa } from 'execa';
import { readCapture } from '../../src/capture/reader.ts';
import type { CallRecord, CaptureRecord } from '../../src/capture/record.ts';
import { privateDirs, privateEnv } from '../support/capture-run.ts';
import { POLAR, ROOT } from '../support/cli.ts';
import { fixtureTask } from '../support/fixture-task.ts';
import { type Standin, startStandin } from '../support/vllm-standin.ts';

const TASK = 'polar-fixtures__jsutil-5';
const SHELL: Record<string, string> = { gemini: 'run_shell_command', opencode: 'bash' };

async function evalOne(harness: string, backendUrl: string, extra: string[] = []) {
  const { home, workdir } = await privateDirs();
  const out = join(workdir, `eval-${harness}`);
  const args = [
    POLAR,
    'eval',
    '--dataset',
    join(ROOT, 'fixtures/swe/mini.jsonl'),
    '--instances',
    TASK,
    '--harness',
    harness,
    '--runtime',
    'local',
    '--allow-unsandboxed',
    '--repos',
    join(ROOT, 'fixtures/swe/repos'),
    '--backend',
    'vllm',
    '--backend-url',
    backendUrl,
    '--model',
    'Qwen/Qwen3-4B',
    '--out',
    out,
    '--json',
    '--quiet',
    ...extra,
  ];
  const r = await execa(process.execPath, args, {
    cwd: workdir,
    env: privateEnv(home),
    extendEnv: false,
    reject: false,
    stdin: 'ignore',
    timeout: 420_000,
  });
  const results = (await readFile(join(out, 'results.jsonl'), 'utf8').catch(() => ''))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  return { r, out, results };
}

async function records(file: string): Promise<CaptureRecord[]> {
  const list: CaptureRecord[] = [];
  for await (const { record } of readCapture(file)) list.push(record);
  return list;
}

describe('polar eval with Gemini CLI and OpenCode', () => {
  let standin: Standin;
  let goldPatch: string;
  before(async () => {
    goldPatch = String((await fixtureTask(TASK)).patch);
    standin = await startStandin({
      policy: (body) => {
        if (body.messages.at(-1)?.role === 'tool') return { content: 'The fix is in place.' };
        const shell = body.tools?.find((t) => Object.values(SHELL).includes(t.function.name))?.function.name;
        // a side call (OpenCode's title) has no tools
        if (!shell) return { content: 'Fix jsutil' };
        const b64 = Buffer.from(goldPatch).toString('base64');
        return {
          toolCalls: [{ name: shell, arguments: { command: `echo ${b64} | base64 -d | git apply` } }],
        };
      },
    });
  });
  after(() => standin.close());

  for (const harness of ['gemini', 'opencode']) {
    test(`${harness}: one task end to end, resolved, and it builds with its reward`, async () => {
      const { r, out, results } = await evalOne(harness, standin.url);
      assert.equal(r.exitCode, 0, String(r.stderr));
      assert.equal(JSON.parse(String(r.stdout)).pass_at_1.mean, 1);
      assert.equal(results.length, 1);
      assert.equal(results[0].resolved, true);
      const recs = await records(results[0].capture);
      const calls = recs.filter((x): x is CallRecord => x.type === 'call');
      assert.ok(calls.every((c) => c.api === (harness === 'gemini' ? 'gemini' : 'openai-chat')));
      // the prompt reached the model as polar rendered it (OpenCode would quote a message word holding spaces)
      const first = calls.find((c) => c.harness_meta.request_kind === undefined)!;
      const prompt = JSON.stringify(first.canonical_request);
      assert.match(prompt, /"text":"<pr_description>\\n/, 'the prompt, unquoted, starts the user turn');
      assert.equal(recs.at(-1)?.type, 'grading');
      const built = await execa(process.execPath, [POLAR, 'build', out], { reject: false, stdin: 'ignore' });
      assert.equal(built.exitCode, 0, String(built.stderr));
      const trajectories = String(built.stdout)
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
      assert.equal(trajectories.length, 1);
      assert.equal(trajectories[0].reward, 1);
    });
  }

  test('gemini: a down backend is an error, not a 0% score, after one retry of its own', async () => {
    // a port nothing listens on: bind one, note it, close it
    const { createServer } = await import('node:net');
    const probe = createServer();
    await new Promise<void>((done) => probe.listen(0, '127.0.0.1', done));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((done) => probe.close(() => done()));
    const { r, results } = await evalOne('gemini', `http://127.0.0.1:${port}/v1`, [
      '--skip-backend-check',
      '--agent-timeout',
      '180',
    ]);
    assert.equal(r.exitCode, 1, String(r.stderr));
    assert.match(String(r.stderr), /all 1 sample ended in an error/);
    assert.equal(results[0].status, 'error');
    assert.equal(results[0].reward, null);
    // general.maxAttempts 2: the first call and one retry, each answered 502 in Google's shape
    const calls = (await records(results[0].capture)).filter((x): x is CallRecord => x.type === 'call');
    assert.equal(calls.length, 2, JSON.stringify(calls.map((c) => c.error)));
    for (const c of calls) {
      assert.equal(c.response.status, 502);
      assert.equal((c.response.body as { error: { status: string } }).error.status, 'UNAVAILABLE');
    }
  });
});
