import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildTinyModel, makeTinyModel } from '../../../scripts/make-tiny-model.ts';
import { createEmbeddedBackend, EmbeddedGenerator } from '../../../src/backends/embedded/index.ts';
import type { TokenBackend } from '../../../src/backends/tokens.ts';
import type { Backend } from '../../../src/backends/types.ts';
import type { CanonicalRequest } from '../../../src/protocols/canonical.ts';
import { tempDir } from '../../support/temp.ts';
import { rescore as rescoreWith } from '../../support/tiny-model.ts';
import { collect, context, isPrefix, recorder } from './tokens-support.ts';

let dir: string;
let backend: Backend;

before(async () => {
  dir = makeTinyModel(tempDir('polar-tiny-'));
  backend = await createEmbeddedBackend({
    kind: 'embedded',
    model: dir,
    embedded: { threads: 1, allowRemote: false },
  });
});
after(async () => {
  await backend?.close();
  rmSync(dir, { recursive: true, force: true });
});

const req = (text: string, extra: Partial<CanonicalRequest> = {}): CanonicalRequest => ({
  model: 'tiny',
  messages: [{ role: 'user', content: [{ type: 'text', text }] }],
  tools: [],
  stream: true,
  maxTokens: 16,
  temperature: 0,
  ...extra,
});

async function run(request: CanonicalRequest, state = new Map<string, unknown>(), callId = 'c') {
  const rec = recorder();
  const out = await collect(backend.generate(request, context(callId, state, rec.recorder)));
  return { ...out, recorded: rec.recorded };
}

/** logprob of each completion token under the test model (test/support/tiny-model.ts) */
const rescore = (prompt: number[], completion: number[], temperature: number) =>
  rescoreWith(dir, prompt, completion, temperature);

describe('embedded backend on the tiny random model (offline)', () => {
  it('builds the same model bytes from the same seed', () => {
    const bytes = readFileSync(join(dir, 'onnx', 'model.onnx'));
    assert.ok(Buffer.from(buildTinyModel(151669)).equals(bytes));
    assert.ok(!Buffer.from(buildTinyModel(151669, { seed: 7 })).equals(bytes));
  });

  it('answers end to end with ids and logprobs consistent with the model (greedy)', async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const { events, response, recorded } = await run(req('Say something.'));
    clearInterval(timer);
    assert.equal(events[0]!.type, 'start');
    assert.ok(response, JSON.stringify(events.at(-1)));
    const ids = recorded.tokens!.completionTokenIds!;
    const lps = recorded.tokens!.completionLogprobs!;
    assert.ok(ids.length > 0 && ids.length <= 16);
    assert.equal(lps.length, ids.length);
    assert.ok(lps.every((lp) => lp <= 0 && Number.isFinite(lp)));
    assert.equal(response.usage.completionTokens, ids.length);
    // the event loop kept running while the worker generated
    assert.ok(ticks > 0);
    const again = await run(req('Say something.'));
    assert.deepEqual(again.recorded.tokens!.completionTokenIds, ids);
    const scored = await rescore(recorded.tokens!.promptTokenIds!, ids, 1);
    for (const [i, s] of scored.entries())
      assert.ok(Math.abs(s - lps[i]!) < 1e-3, `token ${i}: ${s} vs ${lps[i]}`);
  });

  it('samples reproducibly with a seed, logprobs under the sampling distribution', async () => {
    const b = backend as TokenBackend;
    const prompt = (await b.countTokens(req('hi'), context('x', new Map(), recorder().recorder))).tokens;
    assert.ok(prompt > 0);
    const sample = async (seed: number) => {
      const chunks: { ids: number[]; logprobs: (number | null)[] }[] = [];
      const gen = b.generator.generate(
        {
          promptIds: b.prepare(req('hi'), context('x', new Map(), recorder().recorder)).ids,
          maxTokens: 8,
          temperature: 0.7,
          topP: 1,
          seed,
          stopTokenIds: [],
        },
        { signal: new AbortController().signal, recorder: recorder().recorder },
      );
      for (let r = await gen.next(); !r.done; r = await gen.next()) chunks.push(r.value);
      return { ids: chunks.flatMap((c) => c.ids), logprobs: chunks.flatMap((c) => c.logprobs) as number[] };
    };
    const a = await sample(11);
    const c = await sample(11);
    assert.deepEqual(a, c);
    assert.equal(a.ids.length, 8);
    const promptIds = b.prepare(req('hi'), context('x', new Map(), recorder().recorder)).ids;
    const scored = await rescore(promptIds, a.ids, 0.7);
    for (const [i, s] of scored.entries()) {
      assert.ok(Math.abs(s - a.logprobs[i]!) < 1e-3, `token ${i}: ${s} vs ${a.logprobs[i]}`);
    }
  });

  it('shares splicing with the tokens backend: the second call extends the first', async () => {
    const state = new Map<string, unknown>();
    const first = await run(req('one'), state, 'e1');
    const messages = [
      ...req('one').messages,
      { role: 'assistant' as const, content: first.response!.content, toolCalls: [] },
      { role: 'user' as const, content: [{ type: 'text' as const, text: 'two' }] },
    ];
    const second = await run(req('two', { messages }), state, 'e2');
    const t1 = first.recorded.tokens!;
    assert.ok(
      isPrefix([...t1.promptTokenIds!, ...t1.completionTokenIds!], second.recorded.tokens!.promptTokenIds!),
    );
    assert.equal((second.recorded.info.splices as unknown[]).length, 1);
  });

  it('stops when the call is aborted', async () => {
    const controller = new AbortController();
    const rec = recorder();
    const events = [];
    const ctx = { ...context('ab', new Map(), rec.recorder), signal: controller.signal };
    for await (const e of backend.generate(req('x', { maxTokens: 100000 }), ctx)) {
      events.push(e);
      if (events.length === 2) controller.abort();
    }
    const last = events.at(-1)!;
    assert.equal(last.type, 'error');
    assert.match(last.type === 'error' ? last.error.message : '', /cancelled/);
    // the engine is free again afterwards
    const next = await run(req('y', { maxTokens: 2 }));
    assert.ok(next.response);
  });
});

describe('stop strings on the embedded engine', () => {
  it('stops where a stop string completes, drops it from the text, keeps the ids sampled up to there', async () => {
    const full = await run(req('Say something.', { maxTokens: 24 }));
    const text = full.response!.content;
    assert.ok(text.length > 6, `the greedy text is long enough to cut: ${JSON.stringify(text)}`);
    // a stop string taken from the middle of what greedy decoding writes
    const cut = Math.floor(text.length / 2);
    const stop = text.slice(cut, cut + 2);
    const first = text.indexOf(stop);
    const stopped = await run(req('Say something.', { maxTokens: 24, stop: [stop] }));
    assert.equal(stopped.response!.content, text.slice(0, first));
    assert.equal(stopped.response!.finishReason, 'stop');
    const ids = stopped.recorded.tokens!.completionTokenIds!;
    const all = full.recorded.tokens!.completionTokenIds!;
    assert.ok(ids.length < all.length, 'generation ended early');
    assert.deepEqual(ids, all.slice(0, ids.length), 'the same greedy ids, cut');
    assert.equal(stopped.recorded.tokens!.completionLogprobs!.length, ids.length);
  });
});

describe('closing the embedded engine', () => {
  it('closes in order while a generation runs: the call fails, close resolves once the worker is gone', async () => {
    // a second engine of its own (the shared one stays open for the other tests)
    const engine = new EmbeddedGenerator({ source: dir, threads: 1, allowRemote: false });
    await engine.load();
    const rec = recorder().recorder;
    const params = { promptIds: [1, 2, 3], maxTokens: 100000, temperature: 1, topP: 1, stopTokenIds: [] };
    const gen = engine.generate(
      { ...params, seed: 3 },
      { signal: new AbortController().signal, recorder: rec },
    );
    assert.equal((await gen.next()).done, false, 'the generation is running');
    // close with the worker mid-generation: ending the thread there used to abort the process at exit
    const closing = engine.close();
    assert.equal(engine.close(), closing, 'close is idempotent');
    await assert.rejects(
      (async () => {
        for (let r = await gen.next(); !r.done; r = await gen.next());
      })(),
      /the backend closed/,
    );
    await closing;
    // nothing runs after close
    const after = engine.generate(
      { ...params, seed: 4 },
      { signal: new AbortController().signal, recorder: rec },
    );
    await assert.rejects(after.next(), /the backend closed/);
    await assert.rejects(engine.reload(dir), /the backend closed/);
  });
});
