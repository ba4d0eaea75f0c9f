/** Table-driven: argv of `polar capture` -> normalised options, and every bad value named. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { defaultOutput } from '../../../src/capture/options.ts';
import { UsageError } from '../../../src/errors.ts';
import { resolveHarness } from '../../../src/harnesses/index.ts';
import { type BackendFlags, backendOptions } from '../../../src/options/backend.ts';
import { parseArgv, usageError } from '../../support/argv.ts';

/** the capture flags argv parses to, without commander's defaults that every row shares */
function captureFlags(argv: string[]): BackendFlags {
  return parseArgv(['capture', ...argv, '--', 'true']).flags as BackendFlags;
}

describe('backend options', () => {
  const ok: Array<[string[], Record<string, unknown>]> = [
    [
      [],
      {
        kind: 'embedded',
        model: 'onnx-community/Qwen3-0.6B-ONNX',
        timeoutMs: 600_000,
        idleTimeoutMs: 300_000,
      },
    ],
    [
      ['--backend-url', 'http://h/v1', '--model', 'm'],
      { kind: 'vllm', url: 'http://h/v1', model: 'm', timeoutMs: 600_000, idleTimeoutMs: 300_000 },
    ],
    [
      ['--backend', 'sglang', '--backend-url', 'http://h/v1', '--model', 'm', '--backend-timeout', '5'],
      { kind: 'sglang', url: 'http://h/v1', model: 'm', timeoutMs: 5000, idleTimeoutMs: 300_000 },
    ],
    [
      ['--backend', 'openai', '--backend-url', 'http://u', '--model', 'm', '--no-require-token-ids'],
      {
        kind: 'openai',
        url: 'http://u',
        model: 'm',
        timeoutMs: 600_000,
        idleTimeoutMs: 300_000,
        requireTokenIds: false,
      },
    ],
    [
      [
        '--backend',
        'tokens',
        '--backend-url',
        'http://u',
        '--model',
        'm',
        '--chat-template-kwargs',
        '{"enable_thinking":false}',
        '--temperature',
        '0.7',
        '--top-p',
        '0.9',
        '--max-tokens',
        '64',
      ],
      {
        kind: 'tokens',
        url: 'http://u',
        model: 'm',
        chatTemplateKwargs: { enable_thinking: false },
        temperature: 0.7,
        topP: 0.9,
        maxTokens: 64,
        timeoutMs: 600_000,
        idleTimeoutMs: 300_000,
      },
    ],
  ];
  for (const [argv, expected] of ok) {
    test(argv.join(' ') || '(no flags)', () => {
      const saved = process.env.POLAR_BACKEND_API_KEY;
      delete process.env.POLAR_BACKEND_API_KEY;
      try {
        assert.deepEqual(backendOptions(captureFlags(argv)), expected);
      } finally {
        if (saved !== undefined) process.env.POLAR_BACKEND_API_KEY = saved;
      }
    });
  }
  const bad: Array<[string[], RegExp]> = [
    [['--backend', 'x'], /^--backend x is not one of vllm, sglang, openai, tokens, embedded, nemo-rl$/],
    [['--temperature', '-1'], /^--temperature -1: expected a number >= 0$/],
    [['--top-p', '2'], /^--top-p 2: expected a number in \(0, 1\]$/],
    [['--max-tokens', '1.5'], /^--max-tokens 1.5: expected a positive integer$/],
    [['--chat-template-kwargs', '{'], /^--chat-template-kwargs \{: not valid JSON/],
    [['--backend-url', 'localhost:8000'], /^--backend-url localhost:8000: expected an http\(s\) URL/],
    [['--backend-timeout', '0'], /^--backend-timeout 0: expected seconds > 0$/],
    [['--sample', '-1'], /^--sample -1: expected a non-negative integer$/],
    [['--port', '70000'], /^--port 70000: expected an integer from 0 to 65535$/],
    [['--max-body', 'lots'], /^--max-body lots: expected a byte count/],
    [
      ['--harness', 'aider'],
      /^--harness aider is not one of codex, claude, pi, qwen, gemini, opencode, generic$/,
    ],
    [['--pi-api', 'grpc'], /^--pi-api grpc is not one of openai-completions/],
    [['--meta', 'nokey'], /^--meta nokey: expected key=value$/],
    [
      ['--pass-env', 'POLAR_BACKEND_API_KEY'],
      /^--pass-env POLAR_BACKEND_API_KEY: a model or backend key never/,
    ],
    [['--pass-env', 'A=B'], /^--pass-env A=B: not an environment variable name$/],
  ];
  for (const [argv, message] of bad) {
    test(`rejects ${argv.join(' ')}`, () => {
      const error = usageError(['capture', ...argv, '--', 'true']);
      assert.ok(error, 'a usage error');
      assert.match(error, message);
    });
  }
  test('a server backend without --model is a usage error', () => {
    assert.throws(
      () => backendOptions(captureFlags(['--backend', 'vllm', '--backend-url', 'http://u'])),
      (e: unknown) => e instanceof UsageError && /needs --model/.test(e.message),
    );
  });
  test('meta pairs, bytes and seconds', () => {
    const f = parseArgv([
      'capture',
      '--meta',
      'a=1',
      '--meta',
      'b=x=y',
      '--max-body',
      '1MiB',
      '--timeout',
      '2.5',
      '--',
      'true',
    ]).flags;
    assert.deepEqual(f.meta, { a: '1', b: 'x=y' });
    assert.equal(f.maxBody, 1024 * 1024);
    assert.equal(f.timeout, 2500);
    assert.equal(parseArgv(['capture', '--', 'true']).flags.maxBody, 64 * 1024 * 1024);
  });
  test('default output names the harness', () => {
    assert.equal(
      defaultOutput('codex', new Date('2026-01-02T03:04:05.678Z')),
      'polar-captures/2026-01-02T03-04-05-678Z-codex.jsonl',
    );
  });
});

describe('harness detection', () => {
  const cases: Array<[string[], string | undefined, string]> = [
    [['codex', 'exec', 'x'], undefined, 'codex'],
    [['/usr/local/bin/claude', '-p', 'x'], undefined, 'claude'],
    [['npx', 'pi', '-p', 'x'], undefined, 'pi'],
    [['node', 'node_modules/.bin/codex'], undefined, 'codex'],
    [['python', 'agent.py'], undefined, 'generic'],
    [['my-wrapper'], 'pi', 'pi'],
    [['gemini', '--yolo', '-p', 'x'], undefined, 'gemini'],
    [['node', '/m/@google/gemini-cli/bundle/gemini.js', '-p', 'x'], undefined, 'gemini'],
    [['opencode', 'run', 'x'], undefined, 'opencode'],
    [['/m/opencode-ai/bin/opencode.exe', 'run', 'x'], undefined, 'opencode'],
    [['my-wrapper'], 'opencode', 'opencode'],
  ];
  for (const [argv, name, expected] of cases) {
    test(`${argv.join(' ')} -> ${expected}`, () => assert.equal(resolveHarness(name, argv).name, expected));
  }
  test('unknown --harness is a usage error', () =>
    assert.throws(() => resolveHarness('aider', ['x']), /--harness aider is not one of/));
});

describe('--format', () => {
  test('v1, v2 and v3 (or 1, 2 and 3) parse to the version; v3 is the default', () => {
    const format = (argv: string[]) =>
      (parseArgv(['capture', ...argv, '--', 'true']).flags as { format?: number }).format;
    assert.equal(format([]), 3);
    assert.equal(format(['--format', 'v1']), 1);
    assert.equal(format(['--format', '1']), 1);
    assert.equal(format(['--format', 'v2']), 2);
    assert.equal(format(['--format', 'v3']), 3);
  });

  test('another value is refused, naming the flag and the choices', () => {
    assert.match(usageError(['capture', '--format', 'v4', '--', 'true']) ?? '', /--format.*v4.*v1, v2 or v3/);
  });
});
