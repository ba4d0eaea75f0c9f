/**
 * polar gym end to end over real HTTP, with the NeMo-RL-like client of ./nemo-rl-client.ts:
 * POST /run with a task row whose verifier_metadata carries a fixture SWE-bench instance; the local
 * runtime checks it out; a harness-shaped client (./traffic.mjs, run as --harness generic under polar's
 * capture proxy) plays Codex-, Claude Code- or Pi-shaped traffic through --backend tokens (a vLLM
 * /v1/completions stand-in with the real Qwen3 tokenizer, thinking on) and applies the fix; polar grades
 * it. Every answer must pass NeMo RL's contiguity assert, carry exactly the ids the server sampled, and
 * validate against the contract schemas. A compaction-shaped rollout has several traces: the answer is
 * the main chain, the others are counted in the polar_* fields, and the chains glued together would
 * fail the assert (so the assert in this client can fail).
 */
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createBackend } from '../../../src/backends/index.ts';
import type { Backend, BackendOptions } from '../../../src/backends/types.ts';
import { readCapture } from '../../../src/capture/reader.ts';
import type { CallRecord } from '../../../src/capture/record.ts';
import { responseSchema, verifyResponseSchema } from '../../../src/gym/contract.ts';
import { rolloutOutput } from '../../../src/gym/rollout.ts';
import { type Gym, type GymOptions, startGym } from '../../../src/gym/server.ts';
import { LocalRuntime } from '../../../src/rollout/runtime/local.ts';
import type { Runtime } from '../../../src/rollout/runtime/types.ts';
import { type ChatTokenizer, loadChatTokenizer } from '../../../src/tokenizer/chat-tokenizer.ts';
import { ROOT } from '../../support/cli.ts';
import { type StandIn, startCompletionsStandIn } from '../../support/completions-standin.ts';
import { fixtureTask } from '../../support/fixture-task.ts';
import { qwenTokenizerDir } from '../../support/qwen-tokenizer.ts';
import { tempDir } from '../../support/temp.ts';
import { pyJson } from '../../support/vllm-standin.ts';
import { loadSample } from '../protocols/harness-samples.ts';
import { NonContiguousMessages, nemoRlPostprocess } from './nemo-rl-client.ts';

const MODEL = 'Qwen/Qwen3-4B';
const TASK = 'polar-fixtures__jsutil-5';
const TRAFFIC = fileURLToPath(new URL('./traffic.mjs', import.meta.url));
const COMPACTION_MARK = 'CONTEXT CHECKPOINT COMPACTION';
const FOLLOW_UP = 'FOLLOW-UP: which command ran first?';

/** The text after the last real user turn (not a tool response) of a decoded Qwen3 prompt. */
function lastQuery(prompt: string): string {
  const starts = [...prompt.matchAll(/<\|im_start\|>user\n(?!<tool_response>)/g)].map((m) => m.index!);
  return prompt.slice(starts.at(-1) ?? 0);
}

/** A model that runs two commands, then answers; summarises on a compaction request; answers follow-ups. */
function policy(prompt: string): string {
  const query = lastQuery(prompt);
  const think = (text: string) => `<think>\n${text}\n</think>\n\n`;
  if (query.includes(COMPACTION_MARK))
    return `${think('Summarise the work so far.')}Ran two commands; the fix is applied.`;
  if (query.includes('FOLLOW-UP'))
    return `${think('The first command was echo gym-0.')}echo gym-0 ran first.`;
  const n = (query.match(/<tool_response>/g) ?? []).length;
  if (n >= 2) return `${think('Both commands ran; the fix is in place.')}Done: both commands ran.`;
  const tools = /<tools>\n([\s\S]*?)\n<\/tools>/.exec(prompt)?.[1]?.split('\n') ?? [];
  const defs = tools.map(
    (l) => JSON.parse(l) as { function?: { name: string; parameters?: { properties?: object } } },
  );
  const tool = defs.find((d) => /bash|exec|shell/i.test(d.function?.name ?? '')) ?? defs[0];
  const name = tool?.function?.name ?? 'bash';
  const arg = Object.keys(tool?.function?.parameters?.properties ?? {})[0] ?? 'command';
  const call = pyJson({ name, arguments: { [arg]: `echo gym-${n}` } });
  return `${think(`Step ${n + 1}: run echo gym-${n} with ${name}.`)}<tool_call>\n${call}\n</tool_call>`;
}

let standin: StandIn;
let backend: Backend;
let tok: ChatTokenizer;
let instance: Record<string, unknown>;
const backendOptions: BackendOptions = {
  kind: 'tokens',
  model: MODEL,
  tokenizer: qwenTokenizerDir(),
  chatTemplateKwargs: { enable_thinking: true },
};

before(async () => {
  instance = await fixtureTask(TASK);
  standin = await startCompletionsStandIn({ policy, chunkTokens: 5 });
  backend = await createBackend({ ...backendOptions, url: standin.url });
  tok = await loadChatTokenizer(qwenTokenizerDir(), { allowRemote: false });
});
after(async () => {
  await backend?.close();
  await standin?.close();
});

interface Shape {
  api: 'responses' | 'anthropic' | 'chat';
  body: Record<string, unknown>;
  compaction?: string;
  keepItems?: number;
  followUp?: string;
}

async function gymFor(
  shape: Shape,
  runtime?: Runtime,
  extra: Partial<GymOptions> = {},
): Promise<{ gym: Gym; out: string }> {
  const dir = tempDir('polar-gym-test-');
  const spec = join(dir, 'traffic.json');
  await writeFile(spec, JSON.stringify(shape));
  const gym = await startGym({
    harness: 'generic',
    genericCommand: [process.execPath, TRAFFIC],
    harnessEnv: { GYM_TRAFFIC: spec, GYM_PATCH_B64: Buffer.from(String(instance.patch)).toString('base64') },
    backend: backendOptions,
    backendInstance: backend,
    runtime: runtime ?? new LocalRuntime({ reposDir: join(ROOT, 'fixtures/swe/repos') }),
    placement: 'host',
    out: join(dir, 'out'),
    port: 0,
    agentTimeoutMs: 60_000,
    testTimeoutMs: 60_000,
    // the fixture row carries its own test_cmd; no token (test/unit/gym/hardening.test.ts covers both)
    trustRowCommands: true,
    token: null,
    ...extra,
  });
  return { gym, out: join(dir, 'out') };
}

const row = (taskIndex: number) => ({
  responses_create_params: {
    input: [{ role: 'user', content: 'Fix the issue in {{workdir}}:\n{{problem_statement}}' }],
    temperature: 1,
  },
  verifier_metadata: { instance },
  agent_ref: { name: 'polar_swe_agent' },
  _ng_task_index: taskIndex,
  _ng_rollout_index: 0,
});

async function run(gym: Gym, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${gym.url}/run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  assert.equal(res.status, 200, JSON.stringify(json).slice(0, 2000));
  return json;
}

/** the stand-in calls this rollout made, in order */
function servedSince(from: number) {
  return standin.calls.slice(from);
}

type Item = Record<string, unknown> & {
  type: string;
  prompt_token_ids?: number[];
  generation_token_ids?: number[];
  generation_log_probs?: number[];
};

function checkAnswer(result: Record<string, unknown>, served: StandIn['calls'], mainCalls: number) {
  const parsed = verifyResponseSchema.safeParse(result);
  assert.ok(parsed.success, parsed.success ? '' : JSON.stringify(parsed.error.issues.slice(0, 3)));
  const response = result.response as { output: Item[] };
  // NeMo RL's Gym path: one contiguous chain
  const rl = nemoRlPostprocess(result as never);
  assert.equal(rl.reward, 1);
  const trainable = response.output.filter((i) => (i.generation_token_ids?.length ?? 0) > 0);
  assert.equal(trainable.length, mainCalls, 'one trainable item per model call of the main chain');
  assert.equal(rl.message_log.length, 2 * mainCalls);
  // the ids are exactly what the inference server was sent and sampled, for the calls of the chain
  const chain = served.slice(served.length - mainCalls);
  trainable.forEach((item, k) => {
    assert.deepEqual(item.prompt_token_ids, chain[k]!.promptIds, `call ${k}: prompt ids as sent`);
    assert.deepEqual(item.generation_token_ids, chain[k]!.completionIds, `call ${k}: sampled ids`);
    assert.deepEqual(item.generation_log_probs, chain[k]!.logprobs, `call ${k}: logprobs`);
    // thinking on: every generation opens with a think block
    assert.match(tok.decode(item.generation_token_ids!), /^<think>\n/);
  });
  // the token fields sit on the last item of each call: the next item is an environment item or a new call
  response.output.forEach((item, i) => {
    if (!item.generation_token_ids) return;
    const next = response.output[i + 1];
    if (next)
      assert.ok(next.type === 'function_call_output' || next.type === 'message' || next.type === 'reasoning');
  });
  // tool round trip: every function_call is answered by a function_call_output with its call_id
  const callIds = response.output.filter((i) => i.type === 'function_call').map((i) => i.call_id);
  const outputIds = response.output.filter((i) => i.type === 'function_call_output').map((i) => i.call_id);
  assert.deepEqual(outputIds, callIds);
  assert.ok(callIds.length >= 2);
  return rl;
}

describe('polar gym /run: NeMo RL contiguity over harness-shaped traffic (tokens backend, Qwen3, thinking on)', () => {
  for (const [name, shape] of [
    [
      'Codex (Responses API)',
      () => ({ api: 'responses', body: loadSample('codex-1-first-request.json').body }),
    ],
    [
      'Claude Code (Anthropic Messages)',
      () => ({ api: 'anthropic', body: loadSample('claude-1-first-request.json').body }),
    ],
    [
      'Pi (Chat Completions, with a follow-up query)',
      () => ({ api: 'chat', body: loadSample('pi-chat-1-first-request.json').body, followUp: FOLLOW_UP }),
    ],
  ] as const) {
    test(`${name}: resolved, reward 1, one contiguous chain with the sampled ids`, async () => {
      const { gym } = await gymFor(shape() as Shape);
      try {
        const from = standin.calls.length;
        const result = await run(gym, row(0));
        const served = servedSince(from);
        const followUp = (shape() as Shape).followUp ? 1 : 0;
        assert.equal(served.length, 3 + followUp, 'two tool calls, the answer (and the follow-up answer)');
        checkAnswer(result, served, served.length);
        assert.equal(result.resolved, true);
        assert.equal(result.status, 'resolved');
        assert.equal(result.polar_traces, 1);
        assert.equal(result.polar_calls_outside_main, 0);
        // row fields ride along, as NeMo Gym's agents echo them
        assert.deepEqual(result.agent_ref, { name: 'polar_swe_agent' });
        assert.equal(result._ng_task_index, 0);
        assert.deepEqual(result.verifier_metadata, { instance });
        if (followUp) {
          // the follow-up moved Qwen3's last query: its template drops earlier <think> blocks; the splice
          // keeps the sampled ids in the prompt, so the chain stays contiguous
          const prompt = tok.decode(served.at(-1)!.promptIds);
          assert.ok(
            prompt.includes('<think>\nStep 1: run echo gym-0'),
            'earlier reasoning kept in the prompt',
          );
        }
      } finally {
        await gym.close();
      }
    });
  }

  test('POST /v1/responses without an instance: the harness runs in a scratch folder, ungraded', async () => {
    const { gym } = await gymFor({ api: 'chat', body: loadSample('pi-chat-1-first-request.json').body });
    try {
      const from = standin.calls.length;
      const res = await fetch(`${gym.url}/v1/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input: 'Run two commands.' }),
      });
      const body = (await res.json()) as Record<string, unknown>;
      // no instance: the traffic client's `git apply` fails outside a repository, which is fine here
      assert.equal(res.status, 200, JSON.stringify(body).slice(0, 500));
      const parsed = responseSchema.safeParse(body);
      assert.ok(parsed.success, parsed.success ? '' : JSON.stringify(parsed.error.issues.slice(0, 3)));
      const served = servedSince(from);
      assert.equal(served.length, 3);
      const rl = nemoRlPostprocess({ response: body as never, reward: 0 });
      assert.equal(rl.message_log.length, 6);
      assert.deepEqual(rl.sequence, [...served[2]!.promptIds, ...served[2]!.completionIds]);
      assert.equal(
        (body.usage as { output_tokens: number }).output_tokens,
        served.reduce((n, c) => n + c.completionIds.length, 0),
      );
    } finally {
      await gym.close();
    }
  });

  test('Codex with a compaction: several traces, the answer is the main chain, the rest in polar_* fields', async () => {
    const codex = loadSample('codex-1-first-request.json').body;
    const compactionText = (
      loadSample('codex-3-compaction-request.json').body.input as { content: { text: string }[] }[]
    )
      .at(-1)!
      .content[0]!.text.slice(0, 400);
    assert.ok(compactionText.includes(COMPACTION_MARK));
    const keepItems = (codex.input as unknown[]).length;
    const { gym } = await gymFor({ api: 'responses', body: codex, compaction: compactionText, keepItems });
    try {
      const from = standin.calls.length;
      const result = await run(gym, row(1));
      const served = servedSince(from);
      // before: two tool calls + answer; the summary; after: two tool calls + answer
      assert.equal(served.length, 7);
      const rl = checkAnswer(result, served, 3);
      assert.ok(
        tok.decode(rl.sequence).includes('Summary of earlier work:'),
        'the main chain is the resumed one',
      );
      assert.equal(result.polar_calls, 7);
      assert.equal(result.polar_main_calls, 3);
      assert.equal(result.polar_calls_outside_main, 4);
      assert.equal(result.polar_traces, 2);
      const traces = (result.polar as { traces: { kind: string; calls: number; main: boolean }[] }).traces;
      assert.deepEqual(
        traces.map((t) => [t.calls, t.main]),
        [
          [4, false],
          [3, true],
        ],
      );

      // gluing the pre-compaction chain in front (what a naive adapter returns) is not contiguous
      const capture = (result.polar as { capture: string }).capture;
      const calls: CallRecord[] = [];
      for await (const { record } of readCapture(capture)) if (record.type === 'call') calls.push(record);
      const pre = rolloutOutput(calls.slice(0, 4)).output;
      const glued = {
        ...result,
        response: { output: [...pre, ...(result.response as { output: Item[] }).output] },
      };
      assert.throws(() => nemoRlPostprocess(glued as never), NonContiguousMessages);

      // as Codex's profile records it (harness_meta.request_kind), the summary call is a compaction trace
      // and the chain after it resumes the root conversation; the answer is the same main chain
      const marked = calls.map((c, i) =>
        i === 3 ? { ...c, harness_meta: { request_kind: 'compaction' } } : c,
      );
      const out = rolloutOutput(marked);
      assert.deepEqual(
        out.traces.map((t) => [t.kind, t.calls, t.main, t.after_compaction ?? false]),
        [
          ['root', 3, false, false],
          ['compaction', 1, false, false],
          ['root', 3, true, true],
        ],
      );
      assert.deepEqual(
        out.output,
        (result.response as { output: Item[] }).output.map((i) => i),
      );
    } finally {
      await gym.close();
    }
  });
});

describe('polar gym /run: an infrastructure failure is never a reward', () => {
  test('grading that cannot run (the engine is gone): a 200 row with _ng_failure_class, reward null, not reward 0', async () => {
    const local = new LocalRuntime({ reposDir: join(ROOT, 'fixtures/swe/repos') });
    // the harness runs and its calls are answered; the environment for the tests cannot be made
    const broken = Object.create(local) as Runtime;
    broken.prepare = async (i, purpose) => {
      if (purpose === 'grade') throw new Error('the container engine went away');
      return local.prepare(i, purpose);
    };
    const { gym } = await gymFor(
      { api: 'chat', body: loadSample('pi-chat-1-first-request.json').body },
      broken,
    );
    try {
      // NeMo Gym's rollout collection expects a failed rollout as a 200 row carrying _ng_failure_class
      // (nemo_gym/rollout_collection.py: it goes to the failures sidecar; a non-2xx aborts `gym eval run`)
      const json = await run(gym, { ...row(0), _ng_failure_class: 'stale' });
      assert.equal(json._ng_failure_class, 'transient');
      assert.equal(json.reward, null, 'no reward: never trained on as 0');
      assert.equal(json.resolved, null);
      assert.equal(json.status, 'error');
      assert.match(String(json.reason), /container engine went away/);
      assert.deepEqual((json.response as { output: unknown[] }).output, []);
      assert.equal(json._ng_task_index, 0, 'row fields ride along');
    } finally {
      await gym.close();
    }
  });

  test('a successful rollout drops a stale _ng_failure_class echoed from the row', async () => {
    const { gym } = await gymFor({ api: 'chat', body: loadSample('pi-chat-1-first-request.json').body });
    try {
      const json = await run(gym, { ...row(0), _ng_failure_class: 'transient' });
      assert.equal(json.reward, 1);
      assert.equal('_ng_failure_class' in json, false);
    } finally {
      await gym.close();
    }
  });
});

describe('polar gym --grader: a verifier command gives the reward', () => {
  const verifier = `node ${join(ROOT, 'fixtures/verifier/reward.mjs')}`;
  const pi = { api: 'chat', body: loadSample('pi-chat-1-first-request.json').body } as Shape;
  const withMode = (mode: string) => ({ ...row(0), verifier_metadata: { instance: { ...instance, mode } } });

  test("the verifier's reward is the row's reward; it sees the row's own fields", async () => {
    const { gym, out } = await gymFor(pi, undefined, { verifier });
    try {
      // mode patch (fixtures/verifier/reward.mjs): 0.75 for a non-empty patch, a partial reward
      const json = await run(gym, withMode('patch'));
      assert.equal(json.reward, 0.75);
      assert.equal(json.resolved, false);
      assert.equal('_ng_failure_class' in json, false);
      const rollout = (json.polar as { capture: string }).capture.split('/captures/')[0]!;
      const results = JSON.parse((await readFile(join(rollout, 'results.jsonl'), 'utf8')).trim());
      assert.equal(results.grader, 'verifier');
      assert.ok(rollout.startsWith(out));
    } finally {
      await gym.close();
    }
  });

  test('a verifier that fails is a transient failure with no reward, never 0', async () => {
    const { gym } = await gymFor(pi, undefined, { verifier });
    try {
      const json = await run(gym, withMode('fail'));
      assert.equal(json._ng_failure_class, 'transient');
      assert.equal(json.reward, null);
      assert.match(String(json.reason), /verifier grader .* exited 2: cannot reach the checker/);
    } finally {
      await gym.close();
    }
  });
});
