/**
 * Prefix merging: rebuilds the sampling calls of one session into traces (chains), token-exactly.
 * Pure: no I/O, no options beyond the EOT ids and the splice switch. The rule is documented in
 * docs/trajectory-format.md ("How calls become traces"); the idea follows Polar's prefix_merging builder
 * as described in shared/reference/token-capture.md (longest open chain whose tokens are a prefix of the
 * new prompt; interstitials are mask 0; sampled ids are never re-tokenized).
 */
import { callHeadroom, leastHeadroom } from './overlong.ts';
import type { TraceKind } from './record.ts';

/** The fields of one capture call that merging needs (already validated, usable: ids present, no error). */
export interface MergeCall {
  id: string;
  seq: number;
  prompt: readonly number[];
  completion: readonly number[];
  /** one logprob per completion id, or null when the server gave none */
  logprobs: readonly number[] | null;
  tokenExact: boolean;
  finishReason: string | null;
  /** the call's text holds a tool call the server did not parse (record's tool_call_unparsed) */
  unparsed?: boolean;
  /** the call ended at its max tokens (finish reason `length` or a wire API's name for it: overlong.ts) */
  lengthStop?: boolean;
  /** the max tokens in force for the call, when known (overlong.ts maxTokensInForce) */
  maxTokens?: number | null;
  /** harness_meta.request_kind (Codex: turn | compaction | prewarm), or null */
  requestKind: string | null;
  /** harness_meta.trace_kind when the capture names the kind itself, or null */
  traceKind: string | null;
}

export interface MergeOptions {
  /** end-of-turn ids (ChatML/Qwen: 151645 <|im_end|>, 151643 <|endoftext|>) */
  eotIds: readonly number[];
  /**
   * Also join a call whose prompt extends the chain's last *prompt* but not its sampled ids (the template
   * re-rendered the assistant turn): the re-rendered turn, up to its first EOT, is replaced by the sampled
   * ids. Off by default: exact matching only.
   */
  splice: boolean;
  /** sampled ids of a call with an unparsed tool call get mask 0 (--unparsed-tool-calls mask) */
  maskUnparsed?: boolean;
}

export interface MergedTrace {
  kind: TraceKind;
  prompt_ids: number[];
  response_ids: number[];
  loss_mask: (0 | 1)[];
  response_logprobs: number[] | null;
  finish_reason: string | null;
  calls: string[];
  token_exact: boolean;
  /** for kind divergence: index (in this session's traces) of the trace it branched from */
  parent?: number;
  /** for kind divergence: length of the token prefix shared with the parent's sequence */
  diverged_at?: number;
  /** set when a later call of this chain's conversation no longer matched it (the chain ends here) */
  cut?: 'divergence';
  /** set on the first trace started after a compaction call (the conversation resumed from a summary) */
  after_compaction?: true;
  /** number of turns of this trace joined by splicing (only with MergeOptions.splice) */
  spliced_turns: number;
  /** calls of this trace whose tool call the server did not parse, when any */
  tool_call_unparsed?: number;
  /** calls of this trace that ended at their max tokens, when any */
  length_stopped?: number;
  /** the fewest tokens any of its calls had left under its limit, when a limit is known (overlong.ts) */
  headroom?: number;
}

export interface MergeStats {
  /** calls merged into traces (every usable call lands in exactly one trace) */
  calls: number;
  /** calls that extended an existing chain (the rest started a trace) */
  calls_merged: number;
  chains: number;
  /** chains cut because a later call of their conversation diverged */
  truncations: number;
  spliced_turns: number;
  /** turns whose sampled ids lacked an EOT that the next prompt then had (the server stripped the stop
   * token): that EOT is mask-0 glue, not trained */
  eot_from_prompt: number;
  /** traces started by kind */
  kinds: Record<TraceKind, number>;
}

export interface MergeResult {
  traces: MergedTrace[];
  stats: MergeStats;
}

/** request_kind values (harness_meta) whose call never extends a chain, and the kind its trace gets. */
const OWN_TRACE_KINDS: Record<string, TraceKind> = {
  compaction: 'compaction',
  prewarm: 'side',
  side: 'side',
  title: 'side',
  summary: 'side',
  // prompt suggestions, the next-speaker check (Qwen Code, Gemini CLI), memory extraction; Gemini CLI's
  // loop detection, edit correction, web search and fetch, model routing (src/harnesses/kinds.ts)
  suggestion: 'side',
  next_speaker: 'side',
  memory: 'side',
  loop_detection: 'side',
  edit_correction: 'side',
  web_search: 'side',
  web_fetch: 'side',
  router: 'side',
  subagent: 'subagent',
};

const KNOWN_KINDS = new Set<string>(['root', 'compaction', 'subagent', 'divergence', 'side']);

/**
 * A run of a chain's response: ids[from, to) of a call's prompt (glue, mask 0, logprob 0) or of its
 * completion (sampled: its mask, its logprobs). A chain's response is kept as these runs while the calls
 * are merged and written out once, at its final length (materialise): appending token by token to
 * arrays that grow to 32k ids cost a fifth of a build.
 */
interface Part {
  ids: readonly number[];
  from: number;
  to: number;
  mask: 0 | 1;
  /** the sampled ids' logprobs; null for glue (logprob 0) */
  logprobs: readonly number[] | null;
}

interface Chain {
  trace: MergedTrace;
  index: number;
  /** total length of prompt_ids + response_ids */
  length: number;
  /** the response, as runs (trace.response_ids, loss_mask and response_logprobs are filled at the end) */
  parts: Part[];
  lastPrompt: readonly number[];
  lastCompletion: readonly number[];
}

/** Whether the chain's whole sequence is a prefix of `ids`. */
function chainIsPrefix(chain: Chain, ids: readonly number[]): boolean {
  if (chain.length > ids.length) return false;
  // compare from the end first: mismatches are usually late (the newest turn)
  let end = chain.length;
  for (let k = chain.parts.length - 1; k >= 0; k--) {
    const { ids: src, from, to } = chain.parts[k]!;
    for (let i = to - 1, j = end - 1; i >= from; i--, j--) if (src[i] !== ids[j]) return false;
    end -= to - from;
  }
  const p = chain.trace.prompt_ids;
  for (let i = p.length - 1; i >= 0; i--) if (p[i] !== ids[i]) return false;
  return true;
}

function isPrefix(a: readonly number[], b: readonly number[]): boolean {
  if (a.length > b.length) return false;
  for (let i = a.length - 1; i >= 0; i--) if (a[i] !== b[i]) return false;
  return true;
}

/** The length of the prefix the chain's sequence (prompt then response) shares with `ids`. */
function commonPrefix(chain: Chain, ids: readonly number[]): number {
  const n = Math.min(chain.length, ids.length);
  const p = chain.trace.prompt_ids;
  const m = Math.min(p.length, n);
  let i = 0;
  while (i < m && p[i] === ids[i]) i++;
  if (i < m) return i;
  for (const part of chain.parts) {
    for (let k = part.from; k < part.to; k++, i++) if (i >= n || part.ids[k] !== ids[i]) return i;
  }
  return i;
}

function appendGlue(chain: Chain, ids: readonly number[], from: number): void {
  if (from < ids.length) chain.parts.push({ ids, from, to: ids.length, mask: 0, logprobs: null });
  chain.length += ids.length - from;
}

function appendSampled(state: MergeState, chain: Chain, call: MergeCall): void {
  const t = chain.trace;
  delete t.cut;
  const mask = call.unparsed && state.maskUnparsed ? 0 : 1;
  const n = call.completion.length;
  if (n > 0) chain.parts.push({ ids: call.completion, from: 0, to: n, mask, logprobs: call.logprobs });
  if (call.unparsed) t.tool_call_unparsed = (t.tool_call_unparsed ?? 0) + 1;
  if (call.lengthStop) t.length_stopped = (t.length_stopped ?? 0) + 1;
  const room = leastHeadroom(
    t.headroom ?? null,
    callHeadroom(call.completion.length, call.maxTokens ?? null, call.lengthStop === true),
  );
  if (room !== null) t.headroom = room;
  // a call without logprobs leaves the whole response without (response_logprobs stays null)
  if (call.logprobs === null) t.response_logprobs = null;
  chain.length += call.completion.length;
  t.calls.push(call.id);
  t.finish_reason = call.finishReason;
  t.token_exact = t.token_exact && call.tokenExact && call.logprobs !== null;
  chain.lastPrompt = call.prompt;
  chain.lastCompletion = call.completion;
}

/** Packed arrays of one value (0 or 1), sliced for the runs of loss_mask and response_logprobs. */
const repeated: [number[], number[]] = [[], []];

function run(value: 0 | 1, n: number): number[] {
  const all = repeated[value];
  while (all.length < n) all.push(value);
  return all.slice(0, n);
}

/** a.concat(...arrays): one allocation, copied as whole arrays (in batches: an argument list is bounded) */
function concatAll<T>(arrays: T[][]): T[] {
  let out: T[] = [];
  for (let i = 0; i < arrays.length; i += 4096) out = out.concat(...arrays.slice(i, i + 4096));
  return out;
}

/**
 * Writes the chain's runs into its trace's response arrays, each made once at its final length by one
 * concat (packed arrays: JSON.stringify has a fast path for those, not for arrays with holes).
 */
function materialise(chain: Chain): void {
  const t = chain.trace;
  const slice = (a: readonly number[], from: number, to: number): number[] => a.slice(from, to) as number[];
  const { parts } = chain;
  t.response_ids = concatAll(parts.map((p) => slice(p.ids, p.from, p.to)));
  t.loss_mask = concatAll(parts.map((p) => run(p.mask, p.to - p.from))) as (0 | 1)[];
  if (t.response_logprobs !== null)
    t.response_logprobs = concatAll(
      parts.map((p) => (p.logprobs === null ? run(0, p.to - p.from) : slice(p.logprobs, p.from, p.to))),
    );
  chain.parts = [];
}

function emptyKinds(): Record<TraceKind, number> {
  return { root: 0, compaction: 0, subagent: 0, divergence: 0, side: 0 };
}

interface MergeState {
  eot: ReadonlySet<number>;
  maskUnparsed: boolean;
  chains: Chain[];
  stats: MergeStats;
}

function startChain(
  state: MergeState,
  call: MergeCall,
  kind: TraceKind,
  extra: Partial<MergedTrace> = {},
): Chain {
  const trace: MergedTrace = {
    kind,
    prompt_ids: call.prompt.slice(),
    response_ids: [],
    loss_mask: [],
    response_logprobs: [],
    finish_reason: null,
    calls: [],
    token_exact: true,
    spliced_turns: 0,
    ...extra,
  };
  const chain: Chain = {
    trace,
    index: state.chains.length,
    length: call.prompt.length,
    parts: [],
    lastPrompt: call.prompt,
    lastCompletion: [],
  };
  appendSampled(state, chain, call);
  state.chains.push(chain);
  state.stats.chains++;
  state.stats.kinds[kind]++;
  return chain;
}

/** 1. exact: the longest open chain whose whole sequence is a prefix of this prompt. */
function extendExact(state: MergeState, call: MergeCall): boolean {
  let best: Chain | null = null;
  for (const chain of state.chains) {
    if (isSideKind(chain.trace.kind)) continue;
    if ((best === null || chain.length > best.length) && chainIsPrefix(chain, call.prompt)) best = chain;
  }
  if (best === null) return false;
  const last = best.lastCompletion[best.lastCompletion.length - 1];
  const first = call.prompt[best.length];
  if (first !== undefined && state.eot.has(first) && (last === undefined || !state.eot.has(last)))
    state.stats.eot_from_prompt++;
  appendGlue(best, call.prompt, best.length);
  appendSampled(state, best, call);
  state.stats.calls_merged++;
  return true;
}

/**
 * 2a. a chain that was spliced no longer equals the server's tokens, so a call that extends its last
 * call exactly in the server's own tokens (last prompt + completion) continues it without a splice.
 */
function extendSplicedChain(state: MergeState, call: MergeCall): boolean {
  let extended: Chain | null = null;
  for (const chain of state.chains) {
    if (isSideKind(chain.trace.kind) || chain.trace.spliced_turns === 0) continue;
    if (extended !== null && chain.lastPrompt.length <= extended.lastPrompt.length) continue;
    const end = chain.lastPrompt.length + chain.lastCompletion.length;
    if (
      end <= call.prompt.length &&
      isPrefix(chain.lastPrompt, call.prompt) &&
      isPrefix(chain.lastCompletion, call.prompt.slice(chain.lastPrompt.length, end))
    )
      extended = chain;
  }
  if (extended === null) return false;
  appendGlue(extended, call.prompt, extended.lastPrompt.length + extended.lastCompletion.length);
  appendSampled(state, extended, call);
  state.stats.calls_merged++;
  return true;
}

/**
 * 2b. splice: the chain's last prompt is a prefix, the re-rendered assistant turn differs from what
 * was sampled; replace it (up to its first EOT) by the sampled ids.
 */
function extendBySplice(state: MergeState, call: MergeCall): boolean {
  const { eot } = state;
  let spliced: { chain: Chain; from: number } | null = null;
  for (const chain of state.chains) {
    if (isSideKind(chain.trace.kind)) continue;
    if (spliced !== null && chain.lastPrompt.length <= spliced.chain.lastPrompt.length) continue;
    if (!isPrefix(chain.lastPrompt, call.prompt)) continue;
    let k = chain.lastPrompt.length;
    while (k < call.prompt.length && !eot.has(call.prompt[k]!)) k++;
    if (k >= call.prompt.length) continue;
    const last = chain.lastCompletion[chain.lastCompletion.length - 1];
    const sampledEot = last !== undefined && eot.has(last);
    spliced = { chain, from: sampledEot ? k + 1 : k };
  }
  if (spliced === null) return false;
  appendGlue(spliced.chain, call.prompt, spliced.from);
  appendSampled(state, spliced.chain, call);
  spliced.chain.trace.spliced_turns++;
  state.stats.spliced_turns++;
  state.stats.calls_merged++;
  return true;
}

/** 3. a new trace: root, divergence of an open chain, or an independent conversation (subagent). */
function startNewTrace(state: MergeState, call: MergeCall, forcedRoot: boolean, resumed: boolean): void {
  const { chains } = state;
  if (forcedRoot || chains.length === 0) {
    startChain(state, call, 'root');
    return;
  }
  if (resumed) {
    // the first turn after a compaction: the root conversation, resumed from the summary
    startChain(state, call, 'root', { after_compaction: true });
    return;
  }
  let parent: Chain | null = null;
  let shared = 0;
  for (const chain of chains) {
    if (isSideKind(chain.trace.kind)) continue;
    const n = commonPrefix(chain, call.prompt);
    if (n > shared) {
      shared = n;
      parent = chain;
    }
  }
  if (parent !== null && shared >= parent.trace.prompt_ids.length && shared > 0) {
    // same conversation (the first prompt is shared), broken inside the responses: cut the parent here
    // (if a later call extends the parent after all, the branch was a fork and the cut is undone)
    parent.trace.cut = 'divergence';
    startChain(state, call, 'divergence', { parent: parent.index, diverged_at: shared });
  } else if (!chains.some((c) => !isSideKind(c.trace.kind))) {
    // only side traces so far (e.g. a prewarm call first): this is the main conversation
    startChain(state, call, 'root');
  } else {
    startChain(state, call, 'subagent');
  }
}

/**
 * Merges the usable calls of one session, in the order given (the caller sorts by seq), into traces.
 * Every call lands in exactly one trace; traces are in the order they were started.
 */
export function mergeCalls(calls: readonly MergeCall[], options: MergeOptions): MergeResult {
  const state: MergeState = {
    eot: new Set(options.eotIds),
    maskUnparsed: options.maskUnparsed ?? false,
    chains: [],
    stats: {
      calls: 0,
      calls_merged: 0,
      chains: 0,
      truncations: 0,
      spliced_turns: 0,
      eot_from_prompt: 0,
      kinds: emptyKinds(),
    },
  };
  const { chains, stats } = state;
  let afterCompaction = false;
  for (const call of calls) {
    stats.calls++;
    const forced = call.traceKind && KNOWN_KINDS.has(call.traceKind) ? (call.traceKind as TraceKind) : null;
    const own = forced ?? (call.requestKind ? OWN_TRACE_KINDS[call.requestKind] : undefined);
    // side calls (compaction summaries, prewarm, titles) never extend a chain and are never extended
    if (own !== undefined && own !== 'root') {
      startChain(state, call, own);
      if (own === 'compaction') afterCompaction = true;
      continue;
    }
    const resumed = afterCompaction;
    afterCompaction = false;
    if (extendExact(state, call)) continue;
    if (options.splice && (extendSplicedChain(state, call) || extendBySplice(state, call))) continue;
    startNewTrace(state, call, forced === 'root', resumed);
  }
  for (const chain of chains) materialise(chain);
  stats.truncations = chains.filter((c) => c.trace.cut !== undefined).length;
  return { traces: chains.map((c) => c.trace), stats };
}

function isSideKind(kind: TraceKind): boolean {
  return kind === 'compaction' || kind === 'side';
}
