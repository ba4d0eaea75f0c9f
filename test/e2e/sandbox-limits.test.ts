/**
 * Issue 23 item 5: a sample over its memory limit, and one whose fork bomb runs into the process limit,
 * under `polar eval --runtime sandbox`. The agent (the generic harness: a node one-liner) gets a model
 * answer first, so what follows is the model's doing: the sample is graded (an empty patch scores 0),
 * never an infrastructure `error` that --resume would run again for ever, and its result line says
 * which limit ended it (`agent.limit`).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { probeSandbox } from '../../src/rollout/runtime/probe.ts';
import { ROOT } from '../support/cli.ts';
import { evalCli } from '../support/eval-cli.ts';
import { type Standin, startStandin } from '../support/vllm-standin.ts';

const probe = await probeSandbox();
const SKIP = probe.ok ? false : `bubblewrap does not work here: ${probe.error} (${probe.fix})`;

/** one model call through the proxy, then `then` (JavaScript) */
function agent(then: string): string {
  const call = [
    "const r = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', { method: 'POST',",
    "headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },",
    "body: JSON.stringify({ model: process.env.POLAR_MODEL, messages: [{ role: 'user', content: 'hi' }] }) });",
    "console.log('model said', r.status, (await r.text()).length);",
  ].join(' ');
  return `node --input-type=module -e "${`${call} ${then}`.replaceAll('"', '\\"')}"`;
}

describe('limits under --runtime sandbox, at the level of a sample', { skip: SKIP }, () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin();
  });
  after(() => standin?.close());

  async function run(agentCmd: string, limits: string[]) {
    const { exitCode, stderr, results } = await evalCli([
      '--instances',
      'polar-fixtures__jsutil-5',
      '--harness',
      'generic',
      '--agent-cmd',
      agentCmd,
      '--runtime',
      'sandbox',
      '--repos',
      join(ROOT, 'fixtures/swe/repos'),
      '--backend',
      'vllm',
      '--backend-url',
      standin.url,
      '--model',
      'Qwen/Qwen3-4B',
      '--skip-backend-check',
      '--agent-timeout',
      '120',
      ...limits,
    ]);
    return { r: { exitCode, stderr }, line: results[0]! };
  }

  test('over its memory limit: agent_oom, graded (not an error)', async () => {
    const { r, line } = await run(
      agent('const a = []; for (;;) a.push(Buffer.alloc(64 * 1024 * 1024, 1));'),
      ['--memory-limit', '256MiB'],
    );
    assert.equal(r.exitCode, 0, String(r.stderr));
    assert.equal(line.agent.calls, 1, JSON.stringify(line.agent));
    assert.equal(line.agent.limit, 'agent_oom', JSON.stringify(line.agent));
    assert.equal(line.status, 'empty_patch', 'graded: the model changed nothing before it ran out of memory');
    assert.equal(line.reward, 0);
  });

  test('a fork bomb runs into the process limit: agent_pids, graded (not an error)', async () => {
    const bomb = [
      "const { spawn, spawnSync } = await import('node:child_process');",
      "spawn('bash', ['-c', ':(){ :|:& };:'], { stdio: 'ignore' });",
      "for (let i = 0; i < 1000; i++) { const s = spawnSync('true'); if (s.error) throw s.error;",
      'await new Promise((d) => setTimeout(d, 20)); }',
    ].join(' ');
    const { r, line } = await run(agent(bomb), ['--pids-limit', '64']);
    assert.equal(r.exitCode, 0, String(r.stderr));
    assert.equal(line.agent.calls, 1, JSON.stringify(line.agent));
    assert.equal(line.agent.limit, 'agent_pids', JSON.stringify(line.agent));
    assert.notEqual(line.status, 'error');
    assert.equal(line.reward, 0);
  });
});
