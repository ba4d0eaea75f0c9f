/**
 * The contract schemas (src/gym/contract.ts, transcribed from NeMo Gym's pydantic models; sources cited
 * there) against request/response shapes as NeMo Gym produces them, and polar gym's HTTP surface for the
 * parts that need no rollout: /aggregate_metrics, request validation, unknown routes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Backend } from '../../../src/backends/types.ts';
import {
  aggregateMetricsSchema,
  outputItemSchema,
  responseCreateParamsSchema,
  responseSchema,
  runRequestSchema,
  verifyResponseSchema,
} from '../../../src/gym/contract.ts';
import { aggregateMetrics, passAtK } from '../../../src/gym/metrics.ts';
import { assertContiguous, NonContiguousError } from '../../../src/gym/rollout.ts';
import { type Gym, startGym } from '../../../src/gym/server.ts';
import { LocalRuntime } from '../../../src/rollout/runtime/local.ts';
import { tempDir } from '../../support/temp.ts';

/** A row as NeMo Gym's swe_agents data has them (responses_api_agents/swe_agents/data/example.jsonl). */
const gymRow = {
  responses_create_params: {
    input: [],
    metadata: {
      instance_id: 'astropy__astropy-12907',
      base_commit: 'd16bfe05a744909de4b27f5875fe0d4ed41ce607',
      dataset_name: 'princeton-nlp/SWE-bench_Verified',
    },
  },
  agent_ref: { type: 'responses_api_agents', name: 'swe_agent' },
  _ng_task_index: 3,
  _ng_rollout_index: 1,
};

const tokens = {
  prompt_token_ids: [1, 2, 3],
  generation_token_ids: [4, 5],
  generation_log_probs: [-0.1, -0.2],
};

const response = (output: unknown[]) => ({
  id: 'resp_1',
  object: 'response',
  created_at: 1_700_000_000,
  model: 'Qwen/Qwen3-4B',
  output,
  parallel_tool_calls: true,
  tool_choice: 'auto',
  tools: [],
});

describe('contract schemas (NeMo Gym models)', () => {
  test('a NeMo Gym task row is a run request; extra row fields are allowed', () => {
    const parsed = runRequestSchema.parse(gymRow);
    assert.equal(parsed._ng_task_index, 3);
    assert.equal(parsed.responses_create_params.parallel_tool_calls, true, 'OpenAI default filled in');
    assert.equal(parsed.responses_create_params.tool_choice, 'auto');
    assert.deepEqual(parsed.responses_create_params.tools, []);
  });

  test('responses_create_params forbids unknown fields and streaming (extra="forbid", stream: False)', () => {
    assert.equal(responseCreateParamsSchema.safeParse({ input: 'hi', n: 2 }).success, false);
    assert.equal(responseCreateParamsSchema.safeParse({ input: 'hi', stream: true }).success, false);
    assert.equal(responseCreateParamsSchema.safeParse({}).success, false, 'input is required');
    assert.equal(responseCreateParamsSchema.safeParse({ input: 'hi', metadata: { a: 1 } }).success, false);
  });

  test('token metadata is atomic: all three fields or none (_validate_atomic_token_metadata)', () => {
    const call = { type: 'function_call', call_id: 'c1', name: 'bash', arguments: '{}' };
    assert.ok(outputItemSchema.safeParse(call).success);
    assert.ok(outputItemSchema.safeParse({ ...call, ...tokens }).success);
    const partial = outputItemSchema.safeParse({ ...call, prompt_token_ids: [1], generation_token_ids: [2] });
    assert.equal(partial.success, false);
    assert.match(JSON.stringify(partial.error?.issues), /missing: generation_log_probs/);
    assert.equal(
      outputItemSchema.safeParse({ ...call, ...tokens, generation_token_ids: [-1] }).success,
      false,
    );
    // the token fields also ride on input items (they are sent back on the next request)
    const params = responseCreateParamsSchema.safeParse({
      input: [
        { role: 'user', content: 'x' },
        { ...call, ...tokens },
      ],
    });
    assert.ok(params.success);
  });

  test('output items need a type; messages, reasoning and tool outputs validate', () => {
    assert.equal(outputItemSchema.safeParse({ role: 'assistant', content: 'x' }).success, false);
    const items = [
      { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'think' }] },
      {
        type: 'message',
        id: 'm1',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: 'hi', annotations: [] }],
        ...tokens,
      },
      { type: 'function_call_output', call_id: 'c1', output: 'ok' },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'more' }] },
    ];
    for (const item of items) assert.ok(outputItemSchema.safeParse(item).success, JSON.stringify(item));
    assert.equal(outputItemSchema.safeParse({ type: 'reasoning', id: 'x', summary: 'no' }).success, false);
  });

  test('a response needs the openai Response fields; a verify response adds reward', () => {
    assert.ok(responseSchema.safeParse(response([])).success);
    const { tools: _tools, ...noTools } = response([]);
    assert.equal(responseSchema.safeParse(noTools).success, false);
    assert.equal(responseSchema.safeParse({ ...response([]), object: 'chat.completion' }).success, false);
    const verify = { ...gymRow, response: response([]), reward: 1 };
    assert.ok(verifyResponseSchema.safeParse(verify).success);
    assert.equal(verifyResponseSchema.safeParse({ ...verify, reward: 'yes' }).success, false);
  });

  test('the contiguity check polar runs before answering is NeMo RL’s', () => {
    const a = {
      type: 'message',
      prompt_token_ids: [1, 2],
      generation_token_ids: [3],
      generation_log_probs: [0],
    };
    const b = {
      type: 'message',
      prompt_token_ids: [1, 2, 3, 9],
      generation_token_ids: [4],
      generation_log_probs: [0],
    };
    assert.doesNotThrow(() => assertContiguous([a, { type: 'function_call_output' }, b]));
    const c = { ...b, prompt_token_ids: [1, 2, 8, 9] };
    assert.throws(() => assertContiguous([a, c]), NonContiguousError);
  });
});

describe('aggregate metrics (RewardProfiler semantics)', () => {
  const rows = [
    {
      _ng_task_index: 0,
      _ng_rollout_index: 0,
      reward: 1,
      resolved: true,
      polar_calls: 4,
      response: { usage: { input_tokens: 10 } },
    },
    {
      _ng_task_index: 0,
      _ng_rollout_index: 1,
      reward: 0,
      resolved: false,
      polar_calls: 6,
      response: { usage: { input_tokens: 30 } },
    },
    { _ng_task_index: 1, _ng_rollout_index: 0, reward: 0, resolved: false, polar_calls: 2 },
    { _ng_task_index: 1, _ng_rollout_index: 1, reward: 0, resolved: false, polar_calls: 2 },
  ];

  test('mean/max/min/median/std per task and overall; key metrics are the means', () => {
    const m = aggregateMetricsSchema.parse(aggregateMetrics(rows));
    assert.equal(m.agent_metrics['mean/reward'], 0.25);
    assert.equal(m.agent_metrics['max/polar_calls'], 6);
    assert.equal(m.agent_metrics['median/polar_calls'], 3);
    assert.equal(m.agent_metrics['mean/input_tokens'], 20, 'response.usage fields are included');
    assert.equal(m.agent_metrics['mean/resolved'], 0.25, 'booleans count as 0/1');
    assert.ok(Math.abs((m.agent_metrics['std/reward'] as number) - 0.5) < 1e-12, 'sample std');
    assert.equal(m.agent_metrics['pass@1'], 0.25);
    assert.equal(m.agent_metrics['pass@2'], 0.5, 'task 0 has one of two resolved');
    assert.equal(m.group_level_metrics.length, 2);
    assert.equal(m.group_level_metrics[0]!._ng_task_index, 0);
    assert.equal(m.group_level_metrics[0]!['mean/reward'], 0.5);
    assert.equal(m.group_level_metrics[1]!['std/reward'], 0);
    assert.ok(Object.keys(m.key_metrics).every((k) => k.startsWith('mean/')));
    assert.equal(m.key_metrics['mean/reward'], 0.25);
    assert.deepEqual(aggregateMetrics([]), { group_level_metrics: [], agent_metrics: {}, key_metrics: {} });
  });

  test('failed rollouts (_ng_failure_class, reward null) are counted apart, never averaged as 0', () => {
    const failedRow = {
      _ng_task_index: 0,
      _ng_rollout_index: 2,
      reward: null,
      _ng_failure_class: 'transient',
    };
    const m = aggregateMetricsSchema.parse(aggregateMetrics([...rows, failedRow]));
    assert.equal(m.agent_metrics['mean/reward'], 0.25);
    assert.equal(m.agent_metrics['pass@1'], 0.25);
    assert.equal(m.agent_metrics.polar_failed_rollouts, 1);
    assert.equal(m.group_level_metrics[0]!.num_rollouts, 2);
  });

  test('unbiased pass@k', () => {
    assert.equal(passAtK(4, 0, 2), 0);
    assert.equal(passAtK(4, 4, 2), 1);
    assert.ok(Math.abs(passAtK(4, 1, 2) - 0.5) < 1e-12);
    assert.equal(passAtK(3, 2, 2), 1);
  });
});

describe('polar gym HTTP surface without a rollout', () => {
  let gym: Gym;
  const unusedBackend: Backend = {
    kind: 'tokens',
    tokenExact: true,
    url: null,
    async *generate() {
      yield { type: 'error', error: { kind: 'internal', message: 'not called in these tests', status: 500 } };
    },
    async countTokens() {
      return { tokens: 0, exact: true };
    },
    async close() {},
  };
  before(async () => {
    gym = await startGym({
      harness: 'pi',
      backend: { kind: 'tokens', model: 'Qwen/Qwen3-4B' },
      backendInstance: unusedBackend,
      runtime: new LocalRuntime({ reposDir: tempDir('polar-gym-repos-') }),
      placement: 'host',
      out: tempDir('polar-gym-out-'),
      port: 0,
    });
  });
  after(() => gym.close());

  const post = (path: string, body: unknown) =>
    fetch(`${gym.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${gym.token}` },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  test('POST /aggregate_metrics answers AggregateMetrics', async () => {
    const res = await post('/aggregate_metrics', {
      verify_responses: [
        { _ng_task_index: 0, reward: 1 },
        { _ng_task_index: 0, reward: 0 },
      ],
    });
    assert.equal(res.status, 200);
    const m = aggregateMetricsSchema.parse(await res.json());
    assert.equal(m.key_metrics['mean/reward'], 0.5);
  });

  test('invalid bodies are refused with a field, before anything runs', async () => {
    let res = await post('/run', { responses_create_params: { input: 'x', bogus: 1 } });
    assert.equal(res.status, 422);
    assert.match(((await res.json()) as { error: { message: string } }).error.message, /bogus|Unrecognized/);
    res = await post('/run', { responses_create_params: { input: 'fix it' } });
    assert.equal(res.status, 400);
    assert.match(
      ((await res.json()) as { error: { message: string } }).error.message,
      /no SWE-bench instance/,
    );
    res = await post('/run', {
      responses_create_params: { input: 'fix it' },
      verifier_metadata: { instance: { instance_id: 'x', repo: 'a/b', base_commit: 'zz' } },
    });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: { message: string } }).error.message, /base_commit|patch/);
    res = await post('/run', { responses_create_params: { input: 'x', metadata: { instance_id: 'nope' } } });
    assert.equal(res.status, 400);
    res = await post('/run', 'not json');
    assert.equal(res.status, 400);
    res = await post('/v1/responses', { input: 'x', stream: true });
    assert.equal(res.status, 422);
    res = await post('/v1/chat/completions', {});
    assert.equal(res.status, 404);
    const health = await fetch(`${gym.url}/health`);
    assert.equal(((await health.json()) as { ok: boolean }).ok, true);
  });
});
