/**
 * `polar export` end to end on the CPU: the worker builds a tiny random transformers Llama and Qwen3 (real
 * Qwen3 vocabulary), exports them with torch.onnx, and the ONNX model run by Transformers.js /
 * onnxruntime-node (directly and through the embedded backend's KV-cache generation) must give the
 * transformers model's next-token logprobs within 1e-4; int8; in-place reload of the embedded backend;
 * `polar train` on the tiny Llama and the export of its Hugging Face checkpoint. Skips when no Python with
 * torch is found.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { AutoModelForCausalLM, env, Tensor } from '@huggingface/transformers';
import * as ort from 'onnxruntime-node';
import { createEmbeddedBackend, type EmbeddedBackend } from '../../../src/backends/embedded/index.ts';
import type { Backend } from '../../../src/backends/types.ts';
import { EnvironmentError } from '../../../src/errors.ts';
import {
  type ExportResult,
  qwen3TokenizerDir,
  runExport,
  tinyLlamaSpec,
  tokenizerVocabSize,
} from '../../../src/export/export.ts';
import { loadChatTokenizer } from '../../../src/tokenizer/chat-tokenizer.ts';
import { runTrain } from '../../../src/train/launch.ts';
import { TrainProgress } from '../../../src/train/progress.ts';
import { runPolar } from '../../support/cli.ts';
import { NO_TORCH, pythonWithTorch, tempDir, trajectory, writeJsonl } from '../train/fixtures.ts';

const probe = await pythonWithTorch();
const GREEDY = 8;
const TOL = 1e-4;

interface Ref {
  prompt: number[];
  next_logprobs: number[];
  top_ids: number[];
  top_logprobs: number[];
  greedy_ids: number[];
  greedy_logprobs: number[];
}
type Refs = { fp32: Ref[]; int8?: Ref[] };

const SPEC_A = tinyLlamaSpec({ dim: 32, layers: 2, heads: 2, kvHeads: 1, seed: 0 });
const SPEC_B = tinyLlamaSpec({ arch: 'qwen3', dim: 32, layers: 2, heads: 2, kvHeads: 1, seed: 1 });

let work: string;
let prompts: number[][];
let promptsFile: string;
let a: ExportResult;
let b: ExportResult;
let refA: Refs;
let refB: Refs;

function logSoftmaxAt(row: Float32Array, id: number): number {
  let m = Number.NEGATIVE_INFINITY;
  for (const v of row) if (v > m) m = v;
  let s = 0;
  for (const v of row) s += Math.exp(v - m);
  return row[id]! - m - Math.log(s);
}

/** teacher-forced next-token logprobs of `ids` under the ONNX model (one forward pass, all positions) */
async function onnxNextLogprobs(dir: string, ids: number[], dtype: 'fp32' | 'q8'): Promise<number[]> {
  env.allowRemoteModels = false;
  const model = await AutoModelForCausalLM.from_pretrained(dir, { local_files_only: true, dtype });
  try {
    const n = ids.length;
    const { logits } = (await model({
      input_ids: new Tensor('int64', BigInt64Array.from(ids, BigInt), [1, n]),
      attention_mask: new Tensor('int64', new BigInt64Array(n).fill(1n), [1, n]),
    })) as { logits: Tensor };
    const V = logits.dims[2]!;
    assert.equal(logits.dims[1], n, 'num_logits_to_keep 0 keeps every position');
    const data = logits.data as Float32Array;
    return ids.slice(1).map((next, i) => logSoftmaxAt(data.subarray(i * V, (i + 1) * V), next));
  } finally {
    await model.dispose();
  }
}

function assertClose(actual: number[], expected: number[], tol: number, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  const worst = Math.max(...actual.map((v, i) => Math.abs(v - expected[i]!)));
  assert.ok(worst <= tol, `${what}: max |diff| ${worst} > ${tol}`);
}

const silent = {
  backendRequest() {},
  tokens() {},
  warn() {},
  annotate() {},
};

async function greedy(backend: Backend, promptIds: number[]): Promise<{ ids: number[]; logprobs: number[] }> {
  const gen = (backend as EmbeddedBackend).generator;
  const ids: number[] = [];
  const logprobs: number[] = [];
  const it = gen.generate(
    { promptIds, maxTokens: GREEDY, temperature: 0, topP: 1, stopTokenIds: [] },
    { signal: new AbortController().signal, recorder: silent },
  );
  for await (const chunk of it) {
    ids.push(...chunk.ids);
    logprobs.push(...chunk.logprobs.map(Number));
  }
  return { ids, logprobs };
}

async function exportWithRef(spec: string, name: string, quantize?: 'int8') {
  const out = join(work, `${name}.ref.json`);
  const result = await runExport({
    checkpoint: spec,
    onnx: join(work, name),
    quantize,
    reference: { prompts: promptsFile, out },
  });
  return { result, ref: JSON.parse(readFileSync(out, 'utf8')) as Refs };
}

describe('polar export: transformers -> ONNX -> embedded backend', { skip: probe ? false : NO_TORCH }, () => {
  before(async () => {
    work = await tempDir('polar-export-');
    // real harness-like text through the real Qwen3 tokenizer and chat template
    const tok = await loadChatTokenizer(qwen3TokenizerDir());
    const chat = tok.render(
      [
        { role: 'system', content: 'You are a coding agent. Use the tools.' },
        { role: 'user', content: 'Fix the failing test in src/app.ts, then run `npm test`.' },
      ] as never,
      [],
      { enable_thinking: false },
    );
    prompts = [
      tok.encode(chat),
      tok.encode('def add(a, b):\n    return a + b\n\nprint(add(2, 3))  # ünïcødé ✓'),
      tok.encode('<|im_start|>user\nhi<|im_end|>'),
    ];
    promptsFile = join(work, 'prompts.json');
    await writeFile(promptsFile, JSON.stringify({ prompts, greedy: GREEDY }));
    [{ result: a, ref: refA }, { result: b, ref: refB }] = await Promise.all([
      exportWithRef(SPEC_A, 'model-a', 'int8'),
      exportWithRef(SPEC_B, 'model-b'),
    ]);
  });

  test('writes config, tokenizer and a KV-cache decoder with the names Transformers.js feeds', async () => {
    const vocab = tokenizerVocabSize();
    assert.ok(vocab > 151_000, `Qwen3 vocabulary: ${vocab}`);
    assert.deepEqual(a.files, [
      'config.json',
      'generation_config.json',
      'onnx/model.onnx',
      'onnx/model_quantized.onnx',
      'tokenizer.json',
      'tokenizer_config.json',
    ]);
    const config = JSON.parse(readFileSync(join(a.dir, 'config.json'), 'utf8'));
    assert.equal(config.model_type, 'llama');
    assert.equal(config.vocab_size, vocab);
    assert.equal(config.num_hidden_layers, 2);
    assert.equal(config.num_attention_heads, 2);
    assert.equal(config.num_key_value_heads, 1);
    assert.equal(config.head_dim, 16);
    assert.equal(config.tie_word_embeddings, true);
    assert.deepEqual(config.eos_token_id, [151645, 151643]);
    assert.equal(config.polar_export.source, SPEC_A);
    const session = await ort.InferenceSession.create(join(a.dir, 'onnx', 'model.onnx'));
    assert.deepEqual(session.inputNames, [
      'input_ids',
      'attention_mask',
      'position_ids',
      'num_logits_to_keep',
      'past_key_values.0.key',
      'past_key_values.0.value',
      'past_key_values.1.key',
      'past_key_values.1.value',
    ]);
    assert.deepEqual(session.outputNames, [
      'logits',
      'present.0.key',
      'present.0.value',
      'present.1.key',
      'present.1.value',
    ]);
    await session.release();
    const fp32 = statSync(join(a.dir, 'onnx', 'model.onnx')).size;
    const int8 = statSync(join(a.dir, 'onnx', 'model_quantized.onnx')).size;
    // the tied embedding is stored once: vocab x 32 floats, plus small layers
    assert.ok(fp32 < vocab * 32 * 4 * 1.05, `model.onnx is ${fp32} bytes`);
    assert.ok(int8 < fp32 * 0.35, `model_quantized.onnx is ${int8} bytes vs ${fp32}`);
  });

  test('next-token logprobs of the ONNX model match the PyTorch model at every position', async () => {
    for (const [i, ids] of prompts.entries()) {
      const ref = refA.fp32[i]!;
      assert.deepEqual(ref.prompt, ids);
      assertClose(await onnxNextLogprobs(a.dir, ids, 'fp32'), ref.next_logprobs, TOL, `prompt ${i}`);
    }
  });

  test('greedy generation through the embedded backend (KV cache) gives the same ids and logprobs', async () => {
    const backend = await createEmbeddedBackend({
      kind: 'embedded',
      model: a.dir,
      embedded: { threads: 1, allowRemote: false },
    });
    try {
      for (const [i, ids] of prompts.entries()) {
        const ref = refA.fp32[i]!;
        const got = await greedy(backend, ids);
        assert.deepEqual(got.ids, ref.greedy_ids, `prompt ${i}: greedy ids`);
        assertClose(got.logprobs, ref.greedy_logprobs, TOL, `prompt ${i}: greedy logprobs`);
        // the first generated token is the argmax of the last prompt position
        assert.equal(got.ids[0], ref.top_ids[0]);
      }
      assert.ok(
        new Set(refA.fp32.flatMap((r) => r.greedy_ids)).size > 2,
        'the continuations are not trivial',
      );
    } finally {
      await backend.close();
    }
  });

  test('int8: model_quantized.onnx (dtype q8) computes the dequantised model, close to fp32', async () => {
    let drift = 0;
    let count = 0;
    for (const [i, ids] of prompts.entries()) {
      const q = await onnxNextLogprobs(a.dir, ids, 'q8');
      assertClose(q, refA.int8![i]!.next_logprobs, TOL, `prompt ${i} (int8)`);
      for (const [j, v] of q.entries()) {
        drift += Math.abs(v - refA.fp32[i]!.next_logprobs[j]!);
        count++;
      }
    }
    const mean = drift / count;
    assert.ok(mean > 0, 'the quantised model is not the fp32 one');
    assert.ok(mean < 0.25, `mean |int8 - fp32| logprob ${mean}`);
  });

  test('reload: a call in flight finishes on model A, later calls get model B', async () => {
    const backend = await createEmbeddedBackend({
      kind: 'embedded',
      model: a.dir,
      embedded: { threads: 1, allowRemote: false },
    });
    try {
      assert.equal(typeof backend.reload, 'function');
      const ids = prompts[0]!;
      assert.notDeepEqual(refA.fp32[0]!.greedy_ids, refB.fp32[0]!.greedy_ids, 'A and B differ');
      const inFlight = greedy(backend, ids);
      const reloaded = backend.reload!(b.dir);
      const later = greedy(backend, ids);
      const [first, , second] = await Promise.all([inFlight, reloaded, later]);
      assert.deepEqual(first.ids, refA.fp32[0]!.greedy_ids);
      assertClose(first.logprobs, refA.fp32[0]!.greedy_logprobs, TOL, 'in flight (A)');
      assert.deepEqual(second.ids, refB.fp32[0]!.greedy_ids);
      assertClose(second.logprobs, refB.fp32[0]!.greedy_logprobs, TOL, 'after reload (B)');
      assert.equal((backend as EmbeddedBackend).generator.model, b.dir);
      // a directory that does not load: rejected, and B keeps serving
      await assert.rejects(backend.reload!(join(work, 'missing')), EnvironmentError);
      const third = await greedy(backend, prompts[1]!);
      assert.deepEqual(third.ids, refB.fp32[1]!.greedy_ids);
    } finally {
      await backend.close();
    }
  });

  test('polar train trains the tiny Llama on the CPU and its checkpoint exports', async () => {
    const dir = join(work, 'train');
    await mkdir(dir);
    const p = prompts[0]!;
    const rollouts = [0, 1, 2, 3].map((k) =>
      trajectory(
        `r${k}`,
        [
          {
            prompt: p,
            response: [9707 + k, 11, 1879, 151645],
            mask: [1, 1, 1, 1],
            logprobs: [-12, -12, -12, -12],
          },
        ],
        k % 2,
      ),
    );
    const traj = await writeJsonl(join(dir, 'traj.jsonl'), rollouts);
    const out = join(dir, 'ckpt');
    const trained = await runTrain(
      {
        trajectories: traj,
        out,
        flags: { model: SPEC_A, device: 'cpu', batch_rollouts: 4, lr: 0.05, max_steps: 1, tis: false },
      },
      { progress: new TrainProgress({ tty: false, json: true, stdout: { write: () => true } as never }) },
    );
    assert.equal(trained.steps, 1);
    // a Hugging Face checkpoint: what the exporter reads next
    assert.ok(existsSync(join(out, 'step-1', 'config.json')));
    assert.ok(existsSync(join(out, 'step-1', 'model.safetensors')));
    const refOut = join(dir, 'c.ref.json');
    const c = await runExport({
      checkpoint: out, // the run directory: follows `latest`
      onnx: join(dir, 'model-c'),
      reference: { prompts: promptsFile, out: refOut },
    });
    const refC = JSON.parse(readFileSync(refOut, 'utf8')) as Refs;
    const config = JSON.parse(readFileSync(join(c.dir, 'config.json'), 'utf8'));
    assert.equal(config.polar_export.step, 1);
    assert.equal(config.polar_export.source, join(out, 'step-1'));
    const onnx = await onnxNextLogprobs(c.dir, p, 'fp32');
    assertClose(onnx, refC.fp32[0]!.next_logprobs, TOL, 'trained checkpoint');
    // training moved the weights away from the exported initial model
    const moved = Math.max(...onnx.map((v, i) => Math.abs(v - refA.fp32[0]!.next_logprobs[i]!)));
    assert.ok(moved > 1e-3, `trained vs initial: ${moved}`);
  });

  test('the CLI: exports a spec, refuses a hybrid linear-attention model and a missing checkpoint', async () => {
    const polar = (args: string[]) =>
      runPolar(['export', ...args], { env: { POLAR_PYTHON: probe?.python ?? '' }, timeoutMs: 120_000 });
    const small = tinyLlamaSpec({ dim: 8, layers: 1, heads: 2, kvHeads: 1 });
    const [ok, hybrid, missing] = await Promise.all([
      polar([small, '--out', join(work, 'cli'), '--json']),
      polar(['tiny:arch=qwen3_5,vocab=151669,dim=8,layers=2,heads=2', '--out', join(work, 'hybrid')]),
      polar([join(work, 'nope'), '--out', join(work, 'x')]),
    ]);
    assert.equal(ok.exitCode, 0, ok.stderr);
    const result = JSON.parse(ok.stdout) as ExportResult;
    assert.equal(result.dir, join(work, 'cli'));
    assert.match(ok.stderr, /exported tiny:arch=llama/);
    assert.equal(hybrid.exitCode, 1);
    assert.match(
      hybrid.stderr,
      /export failed: .*qwen3_5(_text)? model: polar export writes attention-only decoders/,
    );
    assert.ok(!existsSync(join(work, 'hybrid')), 'nothing left behind');
    assert.equal(missing.exitCode, 3);
    assert.match(missing.stderr, /no such directory/);
  });

  after(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });
});
