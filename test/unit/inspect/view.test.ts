import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { decodeTokens, loadTokenDecoder, type TokenDecoder } from '../../../src/inspect/tokens.ts';
import {
  decodeVarints,
  encodeVarints,
  findRegions,
  runLengths,
  selectTrajectories,
  summarize,
  traceMarkers,
  traceView,
  trajectoryView,
  VocabTable,
} from '../../../src/inspect/view.ts';
import { qwenTokenizer } from '../../support/qwen-tokenizer.ts';
import { CALL1, CALL2, encode, GLUE, makeRecord, makeTrace, PROMPT, sampleRecords } from './helpers.ts';

let decoder: TokenDecoder;
before(async () => {
  decoder = await loadTokenDecoder();
});

describe('token decoding (real Qwen3 tokenizer)', () => {
  test('per-token texts join to the tokenizer decode, multi-byte characters on the completing token', async () => {
    const text = 'naïve café — “quote” 世界 🦜 parrot 𝔘nicode';
    const ids = await encode(text);
    const texts = decodeTokens(decoder, ids);
    assert.equal(texts.length, ids.length);
    assert.equal(texts.join(''), text);
    const tok = await qwenTokenizer();
    assert.equal(texts.join(''), tok.decode(ids));
    // the parrot is two tokens: the first carries no complete character, the second the whole emoji
    const i = texts.findIndex((t) => t.includes('🦜'));
    assert.ok(i > 0);
    assert.equal(texts[i - 1], '');
    assert.ok(!texts.join('').includes('\uFFFD'));
  });

  test('special and added tokens decode to their content', async () => {
    const ids = await encode('<|im_start|>user\n<tool_call>x</tool_call><|im_end|>');
    assert.deepEqual(decodeTokens(decoder, ids), [
      '<|im_start|>',
      'user',
      '\n',
      '<tool_call>',
      'x',
      '</tool_call>',
      '<|im_end|>',
    ]);
    assert.equal(decoder.isSpecial(151645), true);
    assert.equal(decoder.isSpecial(151657), false);
  });

  test('a trailing incomplete character becomes one replacement character', async () => {
    const ids = await encode('🦜');
    const texts = decodeTokens(decoder, ids.slice(0, 1));
    assert.deepEqual(texts, ['\uFFFD']);
  });
});

describe('compact encodings', () => {
  test('varints round-trip, including 0 and ids past 2^14 and 2^21', () => {
    const values = [0, 1, 127, 128, 16383, 16384, 151645, 2 ** 21 + 5, 42];
    assert.deepEqual(decodeVarints(encodeVarints(values)), values);
    assert.equal(encodeVarints([]), '');
  });

  test('run lengths start with a mask-0 run', () => {
    assert.deepEqual(runLengths([1, 1, 0, 0, 0, 1]), [0, 2, 3, 1]);
    assert.deepEqual(runLengths([0, 1]), [1, 1]);
    assert.deepEqual(runLengths([]), [0]);
  });
});

describe('regions', () => {
  test('tool call, tool response and think regions from single added tokens', async () => {
    const ids = [...(await encode(CALL1)), ...(await encode(GLUE)), ...(await encode(CALL2))];
    const texts = decodeTokens(decoder, ids);
    const regions = findRegions(texts);
    assert.deepEqual(
      regions.map((r) => r.kind),
      ['think', 'tool_call', 'tool_response'],
    );
    for (const r of regions) {
      assert.equal(texts[r.start], `<${r.kind}>`);
      assert.equal(texts[r.end - 1], `</${r.kind}>`);
    }
  });

  test('tags split over plain-text tokens, and an unclosed region running to the end', () => {
    const texts = ['a', '<', 'tool', '_call>', '{}', '</tool', '_call>', 'b', '<think>', 'hmm'];
    assert.deepEqual(findRegions(texts), [
      { start: 1, end: 7, kind: 'tool_call' },
      { start: 8, end: 10, kind: 'think' },
    ]);
  });
});

describe('markers and trace views', () => {
  test('a call marker at each mask 0->1 transition, with the call ids in order', async () => {
    const trace = await makeTrace();
    const p = trace.prompt_ids.length;
    const c1 = (await encode(CALL1)).length;
    const glue = (await encode(GLUE)).length;
    const marks = traceMarkers(trace);
    assert.deepEqual(
      marks.map((m) => [m.at, m.kind, m.label, m.title]),
      [
        [p, 'call', 'call 1/2', 'call call-a'],
        [p + c1 + glue, 'call', 'call 2/2', 'call call-b'],
      ],
    );
  });

  test('divergence, cut and truncation marks', async () => {
    const [, b] = await sampleRecords();
    const parent = traceMarkers(b?.traces[0] as never);
    const end = (b?.traces[0]?.prompt_ids.length ?? 0) + (b?.traces[0]?.response_ids.length ?? 0);
    assert.deepEqual(parent.at(-1), {
      at: end,
      kind: 'cut',
      label: 'chain cut: a later call diverged from it',
    });
    const branch = b?.traces[1];
    assert.ok(branch);
    const marks = traceMarkers(branch);
    assert.equal(marks[0]?.kind, 'diverged');
    assert.equal(marks[0]?.at, branch.diverged_at);
    assert.equal(marks[0]?.label, 'diverged from trace 1 here');
    assert.ok(
      marks.some(
        (m) => m.kind === 'truncated' && m.at === branch.prompt_ids.length + branch.response_ids.length,
      ),
    );
  });

  test("the advantage shown is a v1 record's (an older build's); a v2 record has none: polar train computes it", async () => {
    const trace = await makeTrace();
    const vocab = new VocabTable(decoder);
    const v1 = makeRecord('old', [trace]);
    assert.equal(trajectoryView(v1, vocab, decoder).advantage, 0.5);
    const { advantage: _a, ...rest } = v1 as typeof v1 & { advantage: number | null };
    const v2 = { ...rest, v: 2 as const };
    assert.equal(trajectoryView(v2, vocab, decoder).advantage, null);
  });

  test('a trace view keeps ids, mask and logprobs recoverable from the compact form', async () => {
    const trace = await makeTrace();
    const vocab = new VocabTable(decoder);
    const v = traceView(trace, 0, vocab, decoder);
    const seq = [...trace.prompt_ids, ...trace.response_ids];
    assert.deepEqual(
      decodeVarints(v.ids).map((i) => vocab.ids[i]),
      seq,
    );
    const mask: number[] = [];
    v.mask.forEach((n, k) => {
      for (let j = 0; j < n; j++) mask.push(k % 2);
    });
    assert.deepEqual(mask, trace.loss_mask);
    const lp = Buffer.from(v.lp ?? '', 'base64');
    assert.equal(lp.length, v.trained);
    assert.equal(lp[3], 64); // -3.2 * 20
    assert.equal(lp[0], 1); // -0.05 * 20
    assert.equal(v.prompt_len, (await encode(PROMPT)).length);
    // the emoji's first byte-token is not valid UTF-8 on its own: stored as raw bytes
    assert.ok(vocab.entries.some((e) => Array.isArray(e)));
    assert.ok(vocab.special.length > 0);
    assert.ok(vocab.special.every((i) => decoder.isSpecial(vocab.ids[i] as number)));
  });
});

describe('selection and summary', () => {
  test('selectTrajectories keeps the highest and lowest rewards in file order', async () => {
    const t = await makeTrace();
    const rs = [0.5, 1, 0, 0.2, 0.9, null].map((r, i) => makeRecord(`s${i}`, [t], { reward: r }));
    assert.deepEqual(
      selectTrajectories(rs, 4).map((r) => r.id),
      ['s1', 's2', 's4', 's5'],
    );
    assert.equal(selectTrajectories(rs, null).length, 6);
    assert.equal(selectTrajectories(rs, 10).length, 6);
  });

  test('summarize counts kinds, status, rewards and tokens', async () => {
    const s = summarize(await sampleRecords());
    assert.equal(s.trajectories, 2);
    assert.equal(s.traces, 3);
    assert.deepEqual(s.kinds, { root: 2, divergence: 1 });
    assert.deepEqual(s.status, { completed: 1, truncated: 1 });
    assert.equal(s.reward_mean, 0.5);
    assert.equal(s.reward_min, 0);
    assert.equal(s.groups, 1);
    assert.equal(s.traces_truncated + s.traces_chain_cut, 2);
    assert.equal(s.spliced_turns, 1);
  });
});
