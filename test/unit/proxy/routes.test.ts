import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { route } from '../../../src/proxy/protocols.ts';

describe('routes', () => {
  const cases: Array<[string, string, Record<string, string>, string]> = [
    ['POST', '/v1/responses', {}, 'model-call:openai-responses'],
    ['POST', '/responses', {}, 'model-call:openai-responses'],
    ['POST', '/v1/messages?beta=true', {}, 'model-call:anthropic-messages'],
    ['POST', '/v1/messages/count_tokens?beta=true', {}, 'count-tokens:anthropic-messages'],
    ['POST', '/v1/chat/completions', {}, 'model-call:openai-chat'],
    ['POST', '/chat/completions/', {}, 'model-call:openai-chat'],
    ['GET', '/v1/models', {}, 'models:openai-chat'],
    ['GET', '/v1/models', { 'anthropic-version': '2023-06-01' }, 'models:anthropic-messages'],
    ['GET', '/health', {}, 'health'],
    ['GET', '/healthz/', {}, 'health'],
    ['GET', '/v1/responses', {}, 'unknown:openai-chat'],
    ['GET', '/v1/messages', {}, 'unknown:anthropic-messages'],
    ['GET', '/', {}, 'unknown:openai-chat'],
    ['POST', '/v1/embeddings', {}, 'unknown:openai-chat'],
    ['POST', '/v1/other', { 'anthropic-version': '2023-06-01' }, 'unknown:anthropic-messages'],
    ['POST', '/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse', {}, 'model-call:gemini'],
    ['POST', '/v1beta/models/Qwen/Qwen3-4B:generateContent', {}, 'model-call:gemini'],
    ['POST', '/v1/models/m:generateContent', {}, 'model-call:gemini'],
    ['POST', '/v1beta/models/m:countTokens', {}, 'count-tokens:gemini'],
    ['POST', '/v1beta/models/m:embedContent', {}, 'unknown:gemini'],
    ['GET', '/v1beta/models', {}, 'models:gemini'],
    ['GET', '/v1/models', { 'x-goog-api-key': 'k' }, 'models:gemini'],
  ];
  for (const [method, url, headers, expected] of cases) {
    test(`${method} ${url}`, () => {
      const r = route(method, url, headers);
      assert.equal('api' in r ? `${r.kind}:${r.api}` : r.kind, expected);
    });
  }
});
