/**
 * `polar gym` driven as NeMo RL drives it: rows shaped as nemo_rl/experience/rollouts.py
 * (`_prepare_nemo_gym_rows`) writes them (temperature, top_p, max_output_tokens in
 * responses_create_params; `_rowidx`, `agent_ref`, `_ng_task_index`, `_ng_rollout_index`), a LIST of
 * generation servers as NeMo RL hands Gym `policy_base_url` (nemo_rl/environments/nemo_gym.py), each a
 * NeMo RL generation-server stand-in (test/support/nemo-rl-standin.ts: only /v1/chat/completions and
 * /tokenize, prefix replacement, and its assert that temperature/top_p equal the generation config),
 * `--backend nemo-rl` with the start-up probe on, Codex-, Claude Code- and Pi-shaped traffic
 * (./traffic.mjs) with thinking on. Every answer passes NeMo RL's contiguity assert, each rollout stays
 * on one server, the rollouts spread over the servers, and every call the servers received carries the
 * row's temperature, top_p and max_output_tokens. A rollout whose server is gone is a 200 row with
 * `_ng_failure_class` and no reward.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createBackend } from '../../../src/backends/index.ts';
import type { BackendOptions } from '../../../src/backends/types.ts';
import { verifyResponseSchema } from '../../../src/gym/contract.ts';
import { type GymOptions, startGym } from '../../../src/gym/server.ts';
import { LocalRuntime } from '../../../src/rollout/runtime/local.ts';
import { type ChatTokenizer, loadChatTokenizer } from '../../../src/tokenizer/chat-tokenizer.ts';
import { closedUrl, ROOT } from '../../support/cli.ts';
import { fixtureTask } from '../../support/fixture-task.ts';
import { type NemoRlStandin, startNemoRlStandin } from '../../support/nemo-rl-standin.ts';
import { qwenTokenizerDir } from '../../support/qwen-tokenizer.ts';
import { tempDir } from '../../support/temp.ts';
import type { Policy } from '../../support/vllm-standin.ts';
import { loadSample } from '../protocols/harness-samples.ts';
import { nemoRlPostprocess } from './nemo-rl-client.ts';

const MODEL = 'Qwen/Qwen3-4B';
const TASK = 'polar-fixtures__jsutil-5';
const TRAFFIC = fileURLToPath(new URL('./traffic.mjs', import.meta.url));
/** NeMo RL's policy.generation for training (what it writes into every row) */
const TRAIN = { temperature: 0.7, top_p: 0.95 };
const MAX_OUTPUT_TOKENS = 2048;

/** A model that runs two commands, then answers (thinking on). */
const policy: Policy = (body) => {
  let lastUser = -1;
  body.messages.forEach((m, i) => {
    if (m.role === 'user') lastUser = i;
  });
  const n = body.messages.slice(lastUser + 1).filter((m) => m.role === 'tool').length;
  if (n >= 2)
    return { reasoning: 'Both commands ran; the fix is in place.', content: 'Done: both commands ran.' };
  const tool =
    body.tools?.find((t) => /bash|exec|shell/i.test(t.function.name)) ?? body.tools?.[0] ?? undefined;
  const name = tool?.function.name ?? 'bash';
  const arg = Object.keys(tool?.function.parameters?.properties ?? {})[0] ?? 'command';
  return {
    reasoning: `Step ${n + 1}: run echo gym-${n} with ${name}.`,
    toolCalls: [{ name, arguments: { [arg]: `echo gym-${n}` } }],
  };
};

let servers: NemoRlStandin[];
let tok: ChatTokenizer;
let instance: Record<string, unknown>;
// the probe and a harness that sets nothing sample at 1.0 / 1.0: the stand-ins accept that as NeMo RL's
// validation config, so only the requests' own fields can tell whether the row's values were used
const backendOptions: BackendOptions = {
  kind: 'nemo-rl',
  model: MODEL,
  chatTemplateKwargs: { enable_thinking: true },
};

before(async () => {
  instance = await fixtureTask(TASK);
  const config = { policy, temperature: TRAIN.temperature, topP: TRAIN.top_p, valTemperature: 1, valTopP: 1 };
  servers = [await startNemoRlStandin(config), await startNemoRlStandin(config)];
  tok = await loadChatTokenizer(qwenTokenizerDir(), { allowRemote: false });
});
after(async () => {
  await Promise.all((servers ?? []).map((s) => s.close()));
});

async function gymFor(shape: Record<string, unknown>, extra: Partial<GymOptions> = {}) {
  const dir = tempDir('polar-gym-nemo-rl-');
  const spec = join(dir, 'traffic.json');
  await writeFile(spec, JSON.stringify(shape));
  return startGym({
    harness: 'generic',
    genericCommand: [process.execPath, TRAFFIC],
    harnessEnv: { GYM_TRAFFIC: spec, GYM_PATCH_B64: Buffer.from(String(instance.patch)).toString('base64') },
    backend: backendOptions,
    // the URL list, created and probed by the gym as `polar gym --backend-url a,b` does
    backendUrls: servers.map((s) => s.url),
    runtime: new LocalRuntime({ reposDir: join(ROOT, 'fixtures/swe/repos') }),
    placement: 'host',
    out: join(dir, 'out'),
    port: 0,
    agentTimeoutMs: 60_000,
    testTimeoutMs: 60_000,
    trustRowCommands: true,
    token: null,
    ...extra,
  });
}

/** a row as NeMo RL's _prepare_nemo_gym_rows leaves it */
const row = (rolloutIndex: number) => ({
  responses_create_params: {
    input: [{ role: 'user', content: 'Fix the issue in {{workdir}}:\n{{problem_statement}}' }],
    temperature: TRAIN.temperature,
    top_p: TRAIN.top_p,
    max_output_tokens: MAX_OUTPUT_TOKENS,
  },
  verifier_metadata: { instance },
  agent_ref: { type: 'responses_api_agents', name: 'polar_swe_agent' },
  _ng_task_index: 0,
  _ng_rollout_index: rolloutIndex,
  _rowidx: rolloutIndex,
});

async function run(url: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}/run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  assert.equal(res.status, 200, JSON.stringify(json).slice(0, 2000));
  return json;
}

type Item = Record<string, unknown> & { prompt_token_ids?: number[]; generation_token_ids?: number[] };

const SHAPES = [
  [
    'Codex (Responses API)',
    () => ({ api: 'responses', body: loadSample('codex-1-first-request.json').body }),
  ],
  [
    // Claude Code asks max_tokens 32000 and (here) temperature 1: the row's values win
    'Claude Code (Anthropic Messages)',
    () => ({ api: 'anthropic', body: { ...loadSample('claude-1-first-request.json').body, temperature: 1 } }),
  ],
  ['Pi (Chat Completions)', () => ({ api: 'chat', body: loadSample('pi-chat-1-first-request.json').body })],
] as const;

describe('polar gym under NeMo RL: nemo-rl backend, a list of generation servers, the rows NeMo RL writes', () => {
  for (const [name, shape] of SHAPES) {
    test(`${name}: two rollouts on two servers, each contiguous, every call sampled with the row's values`, async () => {
      const gym = await gymFor(shape());
      try {
        const before = servers.map((s) => s.calls.length);
        const results = await Promise.all([run(gym.url, row(0)), run(gym.url, row(1))]);
        const served = servers.map((s, i) => s.calls.slice(before[i]));
        // each server ran exactly one rollout: two tool calls and the answer
        assert.deepEqual(
          served.map((calls) => calls.length),
          [3, 3],
          'the rollouts spread over both servers, every call of a rollout on one',
        );
        for (const calls of served) {
          for (const call of calls) {
            assert.equal(
              call.body.temperature,
              TRAIN.temperature,
              "the row's temperature reached the server",
            );
            assert.equal(call.body.top_p, TRAIN.top_p, "the row's top_p reached the server");
            const asked = call.body.max_completion_tokens ?? call.body.max_tokens;
            assert.equal(asked, MAX_OUTPUT_TOKENS, "the row's max_output_tokens caps the call");
          }
          // after the first call, the server kept the chain with the ids polar put on the last turn
          assert.equal(calls[0]!.requiredPrefix, null);
          assert.ok(calls.slice(1).every((c) => c.requiredPrefix !== null));
        }
        for (const result of results) {
          const parsed = verifyResponseSchema.safeParse(result);
          assert.ok(parsed.success, parsed.success ? '' : JSON.stringify(parsed.error.issues.slice(0, 3)));
          assert.equal(result.reward, 1);
          assert.equal(result._ng_failure_class, undefined);
          assert.equal(result._rowidx, result._ng_rollout_index, 'row fields ride along');
          assert.equal((result.response as { temperature: number }).temperature, TRAIN.temperature);
          const rl = nemoRlPostprocess(result as never);
          const trainable = (result.response as { output: Item[] }).output.filter(
            (i) => (i.generation_token_ids?.length ?? 0) > 0,
          );
          // the chain is one server's calls, id for id
          const key = JSON.stringify(trainable.map((i) => i.generation_token_ids));
          const calls = served.find((c) => JSON.stringify(c.map((x) => x.completionIds)) === key);
          assert.ok(calls, "the rollout's chain is one server's calls");
          assert.equal(trainable.length, calls.length);
          trainable.forEach((item, k) => {
            assert.deepEqual(item.prompt_token_ids, calls[k]!.promptIds, `call ${k}: prompt ids as served`);
            assert.deepEqual(item.generation_token_ids, calls[k]!.completionIds, `call ${k}: sampled ids`);
            assert.match(tok.decode(item.generation_token_ids!), /^<think>\n/, 'thinking on');
          });
          assert.deepEqual(rl.sequence, [...calls[2]!.promptIds, ...calls[2]!.completionIds]);
        }
        const health = (await (await fetch(`${gym.url}/health`)).json()) as { backends: unknown[] };
        assert.equal(health.backends.length, 2);
      } finally {
        await gym.close();
      }
    });
  }

  test('a rollout whose generation server is gone: 200, _ng_failure_class, reward null, no output', async () => {
    const gone = await createBackend({
      ...backendOptions,
      url: await closedUrl(),
      timeoutMs: 5000,
    });
    const gym = await gymFor(SHAPES[2][1](), { backendInstance: gone, backendUrls: [] });
    try {
      const result = await run(gym.url, row(0));
      assert.equal(result._ng_failure_class, 'transient');
      assert.equal(result.reward, null, 'never a 0 reward');
      assert.equal(result.status, 'error');
      assert.match(String(result.reason), /no model answer/);
      const response = result.response as { output: unknown[]; status: string };
      assert.deepEqual(response.output, []);
      assert.equal(response.status, 'failed');
      // what NeMo RL does with it: no trainable item, so it raises before reading the reward
      assert.throws(() => nemoRlPostprocess(result as never), /no generation data/);
    } finally {
      await gym.close();
      await gone.close();
    }
  });

  test('a server set up wrong stops the gym at start, before any rollout', async () => {
    // the probe samples at the gym's --temperature: 0.5 is neither NeMo RL config of the stand-ins
    await assert.rejects(
      gymFor(SHAPES[2][1](), { backend: { ...backendOptions, temperature: 0.5, timeoutMs: 5000 } }),
      /temperature 0\.5/,
    );
  });
});
