/**
 * `polar gym` as a process, with real Pi (from npm): the CLI serves NeMo Gym's agent-server contract;
 * POST /run with a fixture SWE-bench row runs Pi under polar's capture proxy, in the local runtime and
 * in the sandbox runtime (bubblewrap, where it works), against --backend tokens (a vLLM /v1/completions stand-in with the real Qwen3 tokenizer, thinking
 * on); the "model" fixes the task through Pi's bash tool; polar grades the patch. The answer passes
 * NeMo RL's contiguity assert (test/unit/gym/nemo-rl-client.ts) with reward 1.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { execa, type ResultPromise } from 'execa';
import { verifyResponseSchema } from '../../src/gym/contract.ts';
import { probeSandbox } from '../../src/rollout/runtime/probe.ts';
import { privateDirs, privateEnv } from '../support/capture-run.ts';
import { POLAR, ROOT, runPolar, startPolar } from '../support/cli.ts';
import { type StandIn, startCompletionsStandIn } from '../support/completions-standin.ts';
import { fixtureTask } from '../support/fixture-task.ts';
import { qwenTokenizerDir } from '../support/qwen-tokenizer.ts';
import { pyJson } from '../support/vllm-standin.ts';
import { nemoRlPostprocess } from '../unit/gym/nemo-rl-client.ts';

const TASK = 'polar-fixtures__jsutil-5';
const sandbox = await probeSandbox();

describe('polar gym with Pi', () => {
  let standin: StandIn;
  let row: Record<string, unknown>;
  let gym: ResultPromise | undefined;
  before(async () => {
    row = await fixtureTask(TASK);
    const b64 = Buffer.from(String(row.patch)).toString('base64');
    standin = await startCompletionsStandIn({
      chunkTokens: 4,
      policy: (prompt) => {
        if (prompt.includes('<tool_response>'))
          return '<think>\nThe patch applied.\n</think>\n\nThe fix is in place.';
        const call = pyJson({ name: 'bash', arguments: { command: `echo ${b64} | base64 -d | git apply` } });
        return `<think>\nApply the fix with git apply.\n</think>\n\n<tool_call>\n${call}\n</tool_call>`;
      },
    });
  });
  after(async () => {
    gym?.kill('SIGTERM');
    await gym?.catch(() => {});
    await standin.close();
  });

  for (const runtime of ['local', 'sandbox'] as const) {
    test(
      `POST /run (${runtime} runtime): Pi fixes the task, reward 1, one contiguous chain of the sampled ids`,
      {
        skip:
          runtime === 'sandbox' && !sandbox.ok ? `bubblewrap does not work here: ${sandbox.error}` : false,
      },
      async () => {
        const { home, workdir } = await privateDirs();
        gym?.kill('SIGTERM');
        await gym?.catch(() => {});
        gym = startPolar(
          [
            'gym',
            '--harness',
            'pi',
            '--runtime',
            runtime,
            ...(runtime === 'local' ? ['--allow-unsandboxed'] : []),
            '--repos',
            join(ROOT, 'fixtures/swe/repos'),
            '--backend',
            'tokens',
            '--backend-url',
            standin.url,
            '--tokenizer',
            qwenTokenizerDir(),
            // the name the stand-in serves (GET /v1/models): the start-up probe checks it
            '--model',
            'standin',
            '--chat-template-kwargs',
            '{"enable_thinking": true}',
            '--port',
            '0',
            '--out',
            join(workdir, 'gym-out'),
            '--agent-timeout',
            '120',
            '--test-timeout',
            '120',
            // the row below carries its own test_cmd (a fixture, trusted here)
            '--trust-row-commands',
            '--quiet',
          ],
          { cwd: workdir, env: privateEnv(home), extendEnv: false },
        );
        const { url, token } = await new Promise<{ url: string; token: string }>((resolve, reject) => {
          let text = '';
          gym!.stdout!.on('data', (chunk: Buffer) => {
            text += chunk.toString();
            const line = text.split('\n').find((l) => l.startsWith('{'));
            // (no --token: polar gym made one and printed it)
            if (line) resolve(JSON.parse(line) as { url: string; token: string });
          });
          gym!.then((r) => reject(new Error(`polar gym exited ${r.exitCode}: ${r.stderr}`)), reject);
        });
        // the start-up probe's calls came before the {url} line; the rollout's follow
        const from = standin.calls.length;
        const res = await fetch(`${url}/run`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({
            responses_create_params: {
              input: [{ role: 'user', content: 'Fix this issue:\n{{problem_statement}}' }],
              // as NeMo RL writes them into every row: they reach every call, whatever Pi asks
              temperature: 0.6,
              top_p: 0.9,
              max_output_tokens: 1024,
            },
            verifier_metadata: { instance: row },
            agent_ref: { name: 'polar_swe_agent' },
            _ng_task_index: 0,
            _ng_rollout_index: 0,
          }),
        });
        const result = (await res.json()) as Record<string, unknown>;
        assert.equal(res.status, 200, JSON.stringify(result).slice(0, 1500));
        const calls = standin.calls.slice(from);
        assert.ok(verifyResponseSchema.safeParse(result).success);
        assert.equal(result.reward, 1, String(result.reason));
        assert.equal(result.resolved, true);
        const rl = nemoRlPostprocess(result as never);
        assert.equal(rl.message_log.length, 4, 'the tool call and the answer');
        assert.equal(calls.length, 2);
        for (const call of calls) {
          assert.equal(call.body.temperature, 0.6);
          assert.equal(call.body.top_p, 0.9);
          assert.equal(call.body.max_tokens, 1024);
        }
        assert.deepEqual(rl.sequence, [...calls[1]!.promptIds, ...calls[1]!.completionIds]);
        // Pi's system prompt and tools are in the first prompt, the row's prompt is rendered with the instance
        const first = calls[0]!.promptText;
        assert.match(first, /"name": "bash"/);
        assert.ok(first.includes(String(row.problem_statement).trim().slice(0, 40)));
        const output = (result.response as { output: { type: string }[] }).output.map((i) => i.type);
        assert.deepEqual(output, [
          'reasoning',
          'function_call',
          'function_call_output',
          'reasoning',
          'message',
        ]);
        const agg = await fetch(`${url}/aggregate_metrics`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({
            verify_responses: [{ _ng_task_index: 0, reward: result.reward, polar_calls: result.polar_calls }],
          }),
        });
        assert.equal(
          ((await agg.json()) as { key_metrics: Record<string, number> }).key_metrics['mean/reward'],
          1,
        );
      },
    );
  }

  test('the NeMo Gym launcher: dry_run and a list of base URLs give `polar gym --dry-run`, exit 0, nothing probed', async (t) => {
    const python = await execa('python3', ['--version'], { reject: false }).catch(() => null);
    if (!python || python.exitCode !== 0) return t.skip('no python3 here');
    const { home, workdir } = await privateDirs();
    // NeMo Gym's config after resolution (policy_base_url a list, as NeMo RL hands it); ports nothing serves
    const config = {
      dry_run: true,
      polar_swe_agent: {
        responses_api_agents: {
          polar_swe_agent: {
            entrypoint: 'app.py',
            host: '127.0.0.1',
            port: 0,
            polar: {
              command: [process.execPath, POLAR],
              harness: 'pi',
              runtime: 'local',
              allow_unsandboxed: true,
              no_auth: true,
              backend: 'nemo-rl',
              backend_url: ['http://127.0.0.1:9/v1', 'http://127.0.0.1:10/v1'],
              model: 'Qwen/Qwen3-4B',
              chat_template_kwargs: { enable_thinking: true },
              dataset: null,
              out: join(workdir, 'gym-out'),
            },
          },
        },
      },
    };
    const launcher = join(ROOT, 'examples/nemo-gym/responses_api_agents/polar_swe_agent');
    const argv = await execa(
      'python3',
      [
        '-c',
        'import json, sys, app; print(json.dumps(app.polar_argv(json.loads(sys.argv[1]), "polar_swe_agent")))',
        JSON.stringify(config),
      ],
      { cwd: launcher },
    );
    const [command, ...args] = JSON.parse(argv.stdout) as string[];
    assert.ok(args.includes('--dry-run'));
    assert.ok(args.includes('http://127.0.0.1:9/v1,http://127.0.0.1:10/v1'));
    const run = await execa(command!, args, {
      cwd: workdir,
      env: privateEnv(home),
      extendEnv: false,
      stdin: 'ignore',
      reject: false,
    });
    assert.equal(run.exitCode, 0, run.stderr);
    const line = JSON.parse(run.stdout.trim()) as { dry_run: boolean; backend_urls: string[] };
    assert.deepEqual(line, {
      dry_run: true,
      harness: 'pi',
      runtime: 'local',
      backend_urls: ['http://127.0.0.1:9/v1', 'http://127.0.0.1:10/v1'],
    });
  });

  test('a wrong server set-up stops `polar gym` at start with one message, before it listens', async () => {
    const { home, workdir } = await privateDirs();
    const run = await runPolar(
      [
        'gym',
        '--harness',
        'pi',
        '--runtime',
        'local',
        '--allow-unsandboxed',
        '--backend',
        'tokens',
        '--backend-url',
        standin.url,
        '--tokenizer',
        qwenTokenizerDir(),
        '--model',
        'Qwen/Qwen3-4B',
        '--port',
        '0',
        '--out',
        join(workdir, 'gym-out'),
      ],
      { cwd: workdir, env: privateEnv(home), extendEnv: false },
    );
    assert.equal(run.exitCode, 4, run.stderr);
    assert.equal(run.stdout, '', 'no {url} line: it never listened');
    assert.match(run.stderr, /serves standin, not Qwen\/Qwen3-4B/);
  });
});
