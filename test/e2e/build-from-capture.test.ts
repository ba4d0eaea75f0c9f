/**
 * Captures made by `polar capture` with the real harnesses build into one trace per append-only session:
 * through a server whose template renders history as it was sampled, every call extends the previous one,
 * and `polar build` lays the session out as one trace whose trained tokens are exactly the sampled ones.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { TrajectoryRecord } from '../../src/trajectory/record.ts';
import { capture } from '../support/capture-run.ts';
import { runPolar } from '../support/cli.ts';
import { APPEND_ONLY_TEMPLATE, type Standin, startStandin } from '../support/vllm-standin.ts';

const HARNESSES: Array<[string, string[], string[]]> = [
  ['pi', ['--pi-api', 'openai-completions'], ['pi', '-p', 'ECHO polarbear']],
  [
    'codex',
    [],
    [
      'codex',
      'exec',
      '--skip-git-repo-check',
      '--dangerously-bypass-approvals-and-sandbox',
      '--ephemeral',
      'ECHO polarbear',
    ],
  ],
  ['claude', [], ['claude', '-p', 'ECHO polarbear', '--dangerously-skip-permissions']],
];

async function build(file: string): Promise<{ trajectories: TrajectoryRecord[]; stderr: string }> {
  const r = await runPolar(['build', file]);
  assert.equal(r.exitCode, 0, String(r.stderr));
  const trajectories = String(r.stdout)
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as TrajectoryRecord);
  return { trajectories, stderr: String(r.stderr) };
}

describe('capture -> build, real harnesses', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin({
      chatTemplate: APPEND_ONLY_TEMPLATE,
      policy: (body) => {
        // no reasoning: the tool round trip alone
        const last = body.messages.at(-1);
        if (last?.role === 'tool') return { content: 'Done.' };
        const names = ['exec_command', 'Bash', 'bash'];
        const tool = body.tools?.find((t) => names.includes(t.function.name))?.function.name;
        if (!tool) return { content: 'Hello.' };
        const args: Record<string, unknown> =
          tool === 'exec_command' ? { cmd: 'echo polarbear' } : { command: 'echo polarbear' };
        return { toolCalls: [{ name: tool, arguments: args }] };
      },
    });
  });
  after(() => standin.close());

  for (const [name, flags, argv] of HARNESSES) {
    test(`${name}: an append-only session builds into one trace`, async () => {
      const r = await capture(
        ['--backend', 'vllm', '--backend-url', standin.url, '--model', 'Qwen/Qwen3-4B', ...flags],
        argv,
      );
      assert.equal(r.exitCode, 0, r.stderr + r.stdout);
      const calls = r.calls.filter((c) => c.api !== 'anthropic-count-tokens' && c.error === null);
      assert.ok(calls.length >= 2, `tool round trip made ${calls.length} calls`);
      const { trajectories, stderr } = await build(r.file);
      assert.equal(trajectories.length, 1, stderr);
      const t = trajectories[0]!;
      assert.equal(t.session, r.session.id);
      assert.equal(t.harness, name);
      assert.equal(t.status, 'completed');
      // side calls (title generation and the like) may make their own traces; the main chain is one trace
      const main = t.traces.filter((tr) => tr.kind === 'root');
      assert.equal(
        main.length,
        1,
        `traces: ${t.traces.map((x) => `${x.kind}(${x.calls.length})`).join(' ')}\n${stderr}`,
      );
      const root = main[0]!;
      const merged = calls.filter((c) => root.calls.includes(c.id));
      assert.ok(merged.length >= 2, 'the tool round trip merged into the root trace');
      // token for token: prompt + response equals the last merged call's prompt + completion
      const last = merged.at(-1)!;
      assert.deepEqual(
        [...root.prompt_ids, ...root.response_ids],
        [...last.prompt_token_ids!, ...last.completion_token_ids!],
      );
      // mask-1 tokens are exactly the sampled ones, in order, with their logprobs
      const trained = root.response_ids.filter((_, i) => root.loss_mask[i] === 1);
      assert.deepEqual(
        trained,
        merged.flatMap((c) => c.completion_token_ids!),
      );
      const lps = root.response_logprobs!.filter((_, i) => root.loss_mask[i] === 1);
      assert.deepEqual(
        lps,
        merged.flatMap((c) => c.completion_logprobs!),
      );
      assert.equal(t.stats.tokens_trainable, trained.length);
    });
  }
});
