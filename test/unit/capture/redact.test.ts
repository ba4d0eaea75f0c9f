import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { redactHeaders, redactSecrets } from '../../../src/capture/redact.ts';

describe('redaction', () => {
  test('auth headers and key-like headers are redacted, others kept', () => {
    const out = redactHeaders({
      authorization: 'Bearer sk-secret',
      'x-api-key': 'sk-ant-123',
      cookie: 'a=b',
      'x-goog-api-key': 'g',
      'content-type': 'application/json',
      'x-codex-turn-metadata': '{"request_kind":"turn"}',
      accept: ['a', 'b'],
    });
    assert.equal(out.authorization, 'Bearer <redacted>');
    assert.equal(out['x-api-key'], '<redacted>');
    assert.equal(out.cookie, '<redacted>');
    assert.equal(out['x-goog-api-key'], '<redacted>');
    assert.equal(out['content-type'], 'application/json');
    assert.equal(out['x-codex-turn-metadata'], '{"request_kind":"turn"}');
    assert.equal(out.accept, 'a, b');
  });

  test('secrets are scrubbed anywhere in a record', () => {
    const key = 'polar-abcdef0123456789';
    const out = redactSecrets({ a: [`token ${key} end`], b: { c: key }, n: 3 }, [key]);
    assert.deepEqual(out, { a: ['token <redacted> end'], b: { c: '<redacted>' }, n: 3 });
  });
});
