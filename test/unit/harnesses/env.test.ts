/** The harness environment allow-list (issue 17 item 3) and the `--pass-env` names it accepts. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UsageError } from '../../../src/errors.ts';
import { containerEnvNames, harnessEnv, parsePassEnv } from '../../../src/harnesses/env.ts';
import { HARNESSES } from '../../../src/harnesses/index.ts';

const SOURCE = {
  PATH: '/usr/bin',
  HOME: '/home/u',
  LANG: 'C.UTF-8',
  LC_CTYPE: 'C.UTF-8',
  TERM: 'xterm',
  TMPDIR: '/tmp',
  HTTPS_PROXY: 'http://proxy:3128',
  POLAR_BACKEND_API_KEY: 'backend-secret',
  OPENAI_API_KEY: 'sk-user',
  ANTHROPIC_API_KEY: 'sk-ant-user',
  AWS_SECRET_ACCESS_KEY: 'aws',
  GITHUB_TOKEN: 'ghp',
  GOPATH: '/go',
};

describe('harness env', () => {
  test('only the allow-list passes; the profile sets and removes on top', () => {
    const env = harnessEnv(SOURCE, {
      extra: { POLAR_PROMPT: 'p' },
      profile: { OPENAI_API_KEY: 'polar-run-key', TERM: null },
    });
    assert.deepEqual(env, {
      PATH: '/usr/bin',
      HOME: '/home/u',
      LANG: 'C.UTF-8',
      LC_CTYPE: 'C.UTF-8',
      TMPDIR: '/tmp',
      HTTPS_PROXY: 'http://proxy:3128',
      POLAR_PROMPT: 'p',
      OPENAI_API_KEY: 'polar-run-key',
    });
  });

  test('--pass-env adds names, including a token the user chooses to hand over', () => {
    const env = harnessEnv(SOURCE, { passEnv: parsePassEnv(['GOPATH', 'GITHUB_TOKEN']) });
    assert.equal(env.GOPATH, '/go');
    assert.equal(env.GITHUB_TOKEN, 'ghp');
    assert.equal(env.AWS_SECRET_ACCESS_KEY, undefined);
  });

  test('--pass-env refuses the backend key and model vendor keys, and non-names', () => {
    for (const name of [
      'POLAR_BACKEND_API_KEY',
      'OPENAI_API_KEY',
      'ANTHROPIC_API_KEY',
      'ANTHROPIC_AUTH_TOKEN',
    ]) {
      assert.throws(
        () => parsePassEnv([name]),
        (e: unknown) => e instanceof UsageError && e.message.includes(name),
      );
    }
    assert.throws(() => parsePassEnv(['A=B']), UsageError);
    assert.deepEqual(parsePassEnv(['A,B', 'A']), ['A', 'B']);
    assert.deepEqual(parsePassEnv(undefined), []);
  });

  test("a container is passed names only: the profiles', the prompt, HOME and --pass-env", () => {
    const names = containerEnvNames(Object.values(HARNESSES), ['GOPATH']);
    for (const n of [
      'CODEX_HOME',
      'CLAUDE_CONFIG_DIR',
      'PI_CODING_AGENT_DIR',
      'QWEN_HOME',
      'POLAR_PROMPT',
      'GOPATH',
    ])
      assert.ok(names.includes(n), n);
    assert.ok(!names.includes('POLAR_BACKEND_API_KEY'));
    assert.ok(names.every((n) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(n)));
  });
});
