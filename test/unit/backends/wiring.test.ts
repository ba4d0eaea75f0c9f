/**
 * The set-up probe wired into the commands that start harnesses (issue 12 item 3): `polar eval` with a
 * harness agent and `polar loop` stop before any sample, file or harness when the server is down or set
 * up wrong (exit 4, one line naming the URL); `--agent gold` runs no harness and probes nothing.
 * (capture: test/e2e/capture-cli.test.ts; serve: test/e2e/serve.test.ts.)
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { closedUrl, runPolar } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';
import { fixtures, MINI, REPOS } from '../rollout/run/helpers.ts';

const run = (args: string[]) => runPolar(args, { timeoutMs: 120_000 });

const ID = 'polar-fixtures__jsutil-5';
const HARNESS = ['--harness', 'pi', '--runtime', 'local', '--allow-unsandboxed', '--repos', REPOS];

describe('the set-up probe in eval and loop', () => {
  let standin: Standin;
  before(async () => {
    fixtures();
    standin = await startStandin({ toolParser: false });
  });
  after(() => standin.close());

  test('eval against a down server: exit 4 before any sample, the URL named, no results', async () => {
    const url = await closedUrl();
    const out = join(tempDir('polar-wiring-'), 'run');
    const r = await run([
      'eval',
      '--dataset',
      MINI,
      '--instances',
      ID,
      ...HARNESS,
      '--backend-url',
      url,
      '--model',
      'Qwen/Qwen3-4B',
      '--backend-timeout',
      '1',
      '--out',
      out,
    ]);
    assert.equal(r.exitCode, 4, String(r.stderr));
    assert.match(
      String(r.stderr),
      // a refused loopback port fails at once (nothing to wait for), naming the server's root
      new RegExp(`polar: error: nothing listens at ${url.replace(/\/v1$/, '')} \\(connection refused\\)`),
    );
    assert.ok(!existsSync(join(out, 'results.jsonl')), 'no sample ran');
  });

  test('eval against vLLM without tool calling: the server flags to add, exit 4', async () => {
    const out = join(tempDir('polar-wiring-'), 'run');
    const args = ['eval', '--dataset', MINI, '--instances', ID, ...HARNESS, '--out', out];
    const r = await run([...args, '--backend-url', standin.url, '--model', 'Qwen/Qwen3-4B']);
    assert.equal(r.exitCode, 4, String(r.stderr));
    assert.match(String(r.stderr), /tool_calling: requests with tools are refused/);
    assert.match(String(r.stderr), /--enable-auto-tool-choice --tool-call-parser/);
    assert.ok(!existsSync(join(out, 'results.jsonl')));
  });

  test('eval --agent gold runs no harness: no probe, even with a server flag set', async () => {
    const out = join(tempDir('polar-wiring-'), 'run');
    const r = await run([
      'eval',
      '--dataset',
      MINI,
      '--instances',
      ID,
      '--agent',
      'gold',
      '--runtime',
      'local',
      '--repos',
      REPOS,
      '--out',
      out,
      '-q',
    ]);
    assert.equal(r.exitCode, 0, String(r.stderr));
  });

  test('loop against a down server: exit 4 before anything is written', async () => {
    const url = await closedUrl();
    const out = join(tempDir('polar-wiring-'), 'loop');
    const r = await run([
      'loop',
      '--train-set',
      MINI,
      ...HARNESS,
      '--backend-url',
      url,
      '--model',
      'Qwen/Qwen3-4B',
      '--backend-timeout',
      '1',
      '--reload-cmd',
      'true',
      // the trainer's check comes first: on this CPU-only machine it would stop the loop before the probe
      '--device',
      'cpu',
      '--out',
      out,
    ]);
    assert.equal(r.exitCode, 4, String(r.stderr));
    assert.match(
      String(r.stderr),
      // a refused loopback port fails at once (nothing to wait for), naming the server's root
      new RegExp(`polar: error: nothing listens at ${url.replace(/\/v1$/, '')} \\(connection refused\\)`),
    );
    assert.ok(!existsSync(join(out, 'loop.json')), 'no loop run was started');
  });
});
