/** Table-driven: argv of `polar capture` -> normalised options, and every bad value named. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { backendOptions, defaultOutput, parseMeta } from '../../../src/capture/options.ts';
import { UsageError } from '../../../src/errors.ts';
import { resolveHarness } from '../../../src/harnesses/index.ts';

describe('backend options', () => {
  const ok: Array<[Record<string, string | boolean>, Record<string, unknown>]> = [
    [{}, { kind: 'embedded', model: 'onnx-community/Qwen3-0.6B-ONNX' }],
    [
      { backendUrl: 'http://h/v1', model: 'm' },
      { kind: 'vllm', url: 'http://h/v1', model: 'm' },
    ],
    [
      { backend: 'sglang', backendUrl: 'http://h/v1', model: 'm', backendTimeout: '5' },
      { kind: 'sglang', url: 'http://h/v1', model: 'm', timeoutMs: 5000 },
    ],
    [
      { backend: 'openai', backendUrl: 'u', model: 'm', requireTokenIds: false },
      { kind: 'openai', url: 'u', model: 'm', requireTokenIds: false },
    ],
    [
      {
        backend: 'tokens',
        backendUrl: 'u',
        model: 'm',
        chatTemplateKwargs: '{"enable_thinking":false}',
        temperature: '0.7',
        topP: '0.9',
        maxTokens: '64',
      },
      {
        kind: 'tokens',
        url: 'u',
        model: 'm',
        chatTemplateKwargs: { enable_thinking: false },
        temperature: 0.7,
        topP: 0.9,
        maxTokens: 64,
      },
    ],
  ];
  for (const [flags, expected] of ok) {
    test(JSON.stringify(flags), () => {
      const saved = process.env.POLAR_BACKEND_API_KEY;
      delete process.env.POLAR_BACKEND_API_KEY;
      try {
        assert.deepEqual(backendOptions(flags), expected);
      } finally {
        if (saved !== undefined) process.env.POLAR_BACKEND_API_KEY = saved;
      }
    });
  }
  const bad: Array<[Record<string, string>, RegExp]> = [
    [{ backend: 'x' }, /--backend x is not one of/],
    [{ backend: 'vllm', backendUrl: 'u' }, /needs --model/],
    [{ backendUrl: 'u', model: 'm', temperature: '-1' }, /--temperature -1: expected a number >= 0/],
    [{ backendUrl: 'u', model: 'm', topP: '2' }, /--top-p 2/],
    [{ backendUrl: 'u', model: 'm', maxTokens: '1.5' }, /--max-tokens 1.5: expected a positive integer/],
    [{ backendUrl: 'u', model: 'm', chatTemplateKwargs: '{' }, /--chat-template-kwargs \{: not valid JSON/],
  ];
  for (const [flags, message] of bad) {
    test(`rejects ${JSON.stringify(flags)}`, () => {
      assert.throws(
        () => backendOptions(flags),
        (e: unknown) => e instanceof UsageError && message.test(e.message),
      );
    });
  }
  test('meta pairs', () => {
    assert.deepEqual(parseMeta(['a=1', 'b=x=y']), { a: '1', b: 'x=y' });
    assert.throws(() => parseMeta(['nokey']), /--meta nokey: expected key=value/);
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
  ];
  for (const [argv, name, expected] of cases) {
    test(`${argv.join(' ')} -> ${expected}`, () => assert.equal(resolveHarness(name, argv).name, expected));
  }
  test('unknown --harness is a usage error', () =>
    assert.throws(() => resolveHarness('gemini', ['x']), /--harness gemini is not one of/));
});
