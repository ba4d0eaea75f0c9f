/**
 * Issue 17 item 3: a harness sees an allow-list of polar's environment, never the backend key or the user's
 * vendor, cloud and forge secrets; `--pass-env NAME` adds a name. A stand-in harness prints its environment
 * and sends it to the model, so a leak would land in its stdout and in the capture; in a container the
 * `docker exec` command line carries variable names, never values.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { containerEnvNames } from '../../src/harnesses/env.ts';
import { HARNESSES } from '../../src/harnesses/index.ts';
import { buildHostCommand } from '../../src/rollout/runtime/docker.ts';
import { capture } from '../support/capture-run.ts';
import { ROOT } from '../support/cli.ts';
import { type Standin, startStandin } from '../support/vllm-standin.ts';

const SECRETS: Record<string, string> = {
  POLAR_BACKEND_API_KEY: 'backend-secret-0001',
  OPENAI_API_KEY: 'sk-openai-secret-0002',
  ANTHROPIC_API_KEY: 'sk-ant-secret-0003',
  AWS_SECRET_ACCESS_KEY: 'aws-secret-0004',
  AWS_ACCESS_KEY_ID: 'AKIASECRET0005',
  GITHUB_TOKEN: 'ghp_secret0006',
  HF_TOKEN: 'hf_secret0007',
  CODEX_API_KEY: 'codex-secret-0008',
  MY_DB_PASSWORD: 'db-secret-0009',
};
const HARNESS = join(ROOT, 'test/support/env-harness.mjs');
const FAKE_DOCKER = join(ROOT, 'test/support/fake-docker.mjs');

function assertNoSecret(text: string, where: string): void {
  for (const [name, value] of Object.entries(SECRETS)) {
    assert.ok(!text.includes(value), `${name}'s value is in ${where}`);
  }
}

describe('harness environment allow-list', () => {
  let standin: Standin;
  before(async () => {
    standin = await startStandin();
  });
  after(() => standin.close());

  test('no secret of polar reaches the harness or the capture; --pass-env adds a name', async () => {
    const r = await capture(
      [
        '--backend',
        'vllm',
        '--backend-url',
        standin.url,
        '--model',
        'Qwen/Qwen3-4B',
        '--harness',
        'generic',
        '--pass-env',
        'MY_TOOL_SETTING',
      ],
      [process.execPath, HARNESS],
      {
        env: {
          ...SECRETS,
          MY_TOOL_SETTING: 'visible-0010',
          LC_ALL: 'C.UTF-8',
          NOT_LISTED: 'hidden-0011',
          PWD: '/somewhere/polar/was/started',
        },
      },
    );
    assert.equal(r.exitCode, 0, r.stderr);
    const seen = JSON.parse(r.stdout.trim().split('\n')[0]!) as Record<string, string>;
    for (const name of ['PATH', 'HOME', 'LC_ALL', 'MY_TOOL_SETTING']) assert.ok(name in seen, name);
    assert.equal(seen.MY_TOOL_SETTING, 'visible-0010');
    assert.equal(seen.NOT_LISTED, undefined, 'a variable neither allowed nor passed stays with polar');
    // PWD names the directory the harness runs in, not polar's (OpenCode works in $PWD)
    assert.equal(seen.PWD, r.workdir);
    for (const name of ['POLAR_BACKEND_API_KEY', 'AWS_SECRET_ACCESS_KEY', 'GITHUB_TOKEN', 'HF_TOKEN'])
      assert.equal(seen[name], undefined, name);
    // the generic profile's OPENAI_API_KEY / ANTHROPIC_API_KEY are polar's per-run key, not the user's
    assert.match(seen.OPENAI_API_KEY!, /^polar-[0-9a-f]{48}$/);
    assert.equal(seen.ANTHROPIC_API_KEY, seen.OPENAI_API_KEY);
    assertNoSecret(r.stdout, "the harness's environment");
    assertNoSecret(await readFile(r.file, 'utf8'), 'the capture');
    assert.equal(r.calls.length, 1, 'the environment went to the model');
  });

  test('in a container: the docker exec command line has names only, and no secret gets in', async () => {
    const names = containerEnvNames(Object.values(HARNESSES), ['MY_TOOL_SETTING']);
    const command = buildHostCommand(FAKE_DOCKER, 'polar-test-ctr', [process.execPath, HARNESS], names);
    const r = await capture(
      ['--backend', 'vllm', '--backend-url', standin.url, '--model', 'm', '--harness', 'generic'],
      command,
      { env: { ...SECRETS, MY_TOOL_SETTING: 'visible-0010' } },
    );
    assert.equal(r.exitCode, 0, r.stderr);
    const seen = JSON.parse(r.stdout.trim().split('\n')[0]!) as Record<string, string>;
    assert.match(seen.OPENAI_API_KEY!, /^polar-[0-9a-f]{48}$/, 'the per-run key crossed into the container');
    assert.equal(seen.MY_TOOL_SETTING, undefined, 'not passed to polar: not in the container');
    assertNoSecret(r.stdout, "the container's environment");
    assertNoSecret(JSON.stringify(command), 'the docker command line');
    assert.ok(
      command.every((a) => !a.includes('=') || !/^[A-Z_]+=/.test(a)),
      'every -e names a variable, none carries a value',
    );
    assertNoSecret(await readFile(r.file, 'utf8'), 'the capture');
  });
});
