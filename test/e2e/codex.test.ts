/** Real Codex CLI (from npm) under `polar capture` with no provider flags of its own. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { HARNESSES } from '../../src/harnesses/index.ts';
import { assertTokensMatch, assertToolRoundTrip, vllmSuite } from './harness-suite.ts';

const EXEC = [
  'codex',
  'exec',
  '--skip-git-repo-check',
  '--dangerously-bypass-approvals-and-sandbox',
  '--ephemeral',
];

describe('codex', () => {
  const suite = vllmSuite();

  test('plain answer', async () => {
    const from = suite.standin.calls.length;
    const r = await suite.capture([...EXEC, 'Say hello']);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.match(r.stdout, /Hello from the stand-in\./);
    assert.equal(r.session.harness, 'codex');
    assert.ok(r.calls.length >= 1);
    assert.ok(r.calls.every((c) => c.api === 'openai-responses' && c.stream));
    assert.ok(
      r.calls.some((c) => c.harness_meta.request_kind === 'turn'),
      'codex turn metadata recorded',
    );
    // Codex's web_search and namespace tools cannot go to a function-only backend: dropped, and said so
    assert.ok(
      r.calls[0]!.warnings.some((w) => /web_search/.test(w)),
      JSON.stringify(r.calls[0]!.warnings),
    );
    assertTokensMatch(r.calls, suite.standin, from);
  });

  test('tool call round trip through exec_command', async () => {
    const from = suite.standin.calls.length;
    const r = await suite.capture([...EXEC, 'ECHO polarbear']);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.match(r.stdout, /Done\. Output: polarbear/);
    assertToolRoundTrip(r.calls, 'polarbear');
    assertTokensMatch(r.calls, suite.standin, from);
  });

  test('compaction: recorded as request_kind compaction, and recognised by its shape alone too', async () => {
    // a tiny auto-compaction limit makes Codex summarise the history after the first turn (docs: harnesses)
    const r = await suite.capture([...EXEC, '-c', 'model_auto_compact_token_limit=2000', 'ECHO polarbear']);
    assert.equal(r.exitCode, 0, r.stderr);
    const compaction = r.calls.filter((c) => c.harness_meta.request_kind === 'compaction');
    assert.equal(compaction.length, 1, JSON.stringify(r.calls.map((c) => c.harness_meta.request_kind)));
    const body = compaction[0]!.request.body;
    assert.equal(HARNESSES.codex.callMeta({}, body).request_kind, 'compaction', 'the shape rule agrees');
    assert.ok(r.calls.some((c) => c.harness_meta.request_kind === 'turn'));
  });

  test('user flags win over polar defaults', async () => {
    const r = await suite.capture([...EXEC, '-m', 'my-alias', 'Say hello']);
    assert.equal(r.exitCode, 0, r.stderr);
    const body = r.calls[0]!.request.body as { model: string };
    assert.equal(body.model, 'my-alias', 'codex sent the model the user asked for');
    assert.equal(
      (r.calls[0]!.backend_request!.body as { model: string }).model,
      'Qwen/Qwen3-4B',
      'the backend got the served model',
    );
  });
});
