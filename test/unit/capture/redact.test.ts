import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { redactHeaders, redactSecrets } from '../../../src/capture/redact.ts';
import { redactUrl } from '../../../src/util/redact.ts';

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

  test('x-auth*, openai-organization and openai-project headers are redacted (issue 17 item 3)', () => {
    const out = redactHeaders({
      'x-auth': 'abc',
      'x-auth-token': 'def',
      'openai-organization': 'org-123',
      'openai-project': 'proj_1',
    });
    for (const name of ['x-auth', 'x-auth-token', 'openai-organization', 'openai-project'])
      assert.equal(out[name], '<redacted>', name);
  });

  test('credential query parameters in a path or URL are redacted, others kept', () => {
    assert.equal(
      redactUrl('/v1/chat/completions?api_key=sk-1&beta=true&api%5Fkey=x&key=k&token=t'),
      '/v1/chat/completions?api_key=<redacted>&beta=true&api%5Fkey=<redacted>&key=<redacted>&token=<redacted>',
    );
    assert.equal(redactUrl('http://h:1/v1/responses'), 'http://h:1/v1/responses');
    assert.equal(redactUrl('/v1/messages?beta=true'), '/v1/messages?beta=true');
  });

  test('userinfo is redacted, in a URL and in a text quoting URLs (issue 22 item 3)', () => {
    assert.equal(
      redactUrl('http://user:PW@127.0.0.1:47001/v1?api_key=Q'),
      'http://<redacted>@127.0.0.1:47001/v1?api_key=<redacted>',
    );
    assert.equal(redactUrl('https://tok@gw.example/v1'), 'https://<redacted>@gw.example/v1');
    assert.equal(
      redactUrl(
        'backend http://u:p@h:1/v1/chat/completions unreachable: ECONNREFUSED; see https://h/x?token=t&a=b',
      ),
      'backend http://<redacted>@h:1/v1/chat/completions unreachable: ECONNREFUSED; see https://h/x?token=<redacted>&a=b',
    );
    // what is not a credential stays: an e-mail address, a path, other parameters
    assert.equal(redactUrl('ask a@b.c about /v1/x?model=q'), 'ask a@b.c about /v1/x?model=q');
  });

  test('secrets are scrubbed anywhere in a record', () => {
    const key = 'polar-abcdef0123456789';
    const out = redactSecrets({ a: [`token ${key} end`], b: { c: key }, n: 3 }, [key]);
    assert.deepEqual(out, { a: ['token <redacted> end'], b: { c: '<redacted>' }, n: 3 });
  });
});
