/**
 * Turns trajectory records into the compact data the page's script renders: token ids as base64
 * varints of indices into one shared vocabulary table (the bytes of each id used, once per page), the
 * loss mask as run lengths, sampling logprobs quantised to one byte, and the marks computed here from the
 * decoded text and the trace fields (call boundaries, divergence, cut, truncation, tool call / tool
 * response / think regions).
 */
import type { Trace, TrajectoryRecord } from '../trajectory/record.ts';
import { decodeTokens, type TokenDecoder } from './tokens.ts';

export type RegionKind = 'tool_call' | 'tool_response' | 'think';
export const REGION_KINDS: RegionKind[] = ['tool_call', 'tool_response', 'think'];

/** [start, end) in sequence positions (prompt_ids + response_ids) */
export interface Region {
  start: number;
  end: number;
  kind: RegionKind;
}

export type MarkerKind = 'call' | 'diverged' | 'cut' | 'truncated';

/** shown just before the token at `at` (at = sequence length: after the last token) */
export interface Marker {
  at: number;
  kind: MarkerKind;
  label: string;
  title?: string;
}

export interface TraceView {
  index: number;
  kind: string;
  prompt_len: number;
  response_len: number;
  trained: number;
  calls: number;
  finish_reason: string | null;
  token_exact: boolean;
  badges: string[];
  markers: Marker[];
  regions: Array<[number, number, number]>;
  /** base64 of LEB128 varints: vocabulary-table indices of prompt_ids + response_ids */
  ids: string;
  /** run lengths over response_ids, alternating mask 0, mask 1, ... (first run may be 0) */
  mask: number[];
  /** base64, one byte per mask-1 token: round(-logprob * 20) capped at 254; null: no logprobs */
  lp: string | null;
}

export interface TrajectoryView {
  id: string;
  task_id: string | null;
  sample: number | null;
  group_id: string | null;
  harness: string;
  model: string;
  status: string;
  reward: number | null;
  /** a trajectory v1 record's (an older polar build's); v2 has none: polar train computes it */
  advantage: number | null;
  tokens_trainable: number;
  tokens_total: number;
  traces: TraceView[];
}

/** One table of the ids a page uses: index -> text (valid UTF-8 on its own) or raw bytes. */
export class VocabTable {
  readonly entries: Array<string | number[]> = [];
  readonly ids: number[] = [];
  readonly special: number[] = [];
  private readonly local = new Map<number, number>();
  private readonly utf8 = new TextDecoder('utf-8', { fatal: true });

  constructor(private readonly decoder: TokenDecoder) {}

  index(id: number): number {
    let i = this.local.get(id);
    if (i !== undefined) return i;
    i = this.entries.length;
    const bytes = this.decoder.bytes(id);
    let entry: string | number[];
    try {
      entry = this.utf8.decode(bytes);
    } catch {
      entry = [...bytes];
    }
    this.entries.push(entry);
    this.ids.push(id);
    if (this.decoder.isSpecial(id)) this.special.push(i);
    this.local.set(id, i);
    return i;
  }
}

export function encodeVarints(values: readonly number[]): string {
  const out: number[] = [];
  for (let v of values) {
    while (v >= 0x80) {
      out.push((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    out.push(v);
  }
  return Buffer.from(out).toString('base64');
}

export function decodeVarints(b64: string): number[] {
  const bytes = Buffer.from(b64, 'base64');
  const out: number[] = [];
  let v = 0;
  let mul = 1;
  for (const b of bytes) {
    v += (b & 0x7f) * mul;
    if (b & 0x80) mul *= 128;
    else {
      out.push(v);
      v = 0;
      mul = 1;
    }
  }
  return out;
}

/** Run lengths of a 0/1 array, starting with a (possibly empty) run of 0. */
export function runLengths(mask: readonly number[]): number[] {
  const runs: number[] = [];
  let current = 0;
  let n = 0;
  for (const m of mask) {
    if (m === current) n++;
    else {
      runs.push(n);
      current = m;
      n = 1;
    }
  }
  runs.push(n);
  return runs;
}

export function quantizeLogprobs(trace: Trace): string | null {
  if (!trace.response_logprobs) return null;
  const out: number[] = [];
  trace.loss_mask.forEach((m, i) => {
    if (m !== 1) return;
    const lp = trace.response_logprobs?.[i] ?? 0;
    out.push(Math.max(0, Math.min(254, Math.round(-lp * 20))));
  });
  return Buffer.from(out).toString('base64');
}

const TAGS: Array<[string, RegionKind, boolean]> = [
  ['<tool_call>', 'tool_call', true],
  ['</tool_call>', 'tool_call', false],
  ['<tool_response>', 'tool_response', true],
  ['</tool_response>', 'tool_response', false],
  ['<think>', 'think', true],
  ['</think>', 'think', false],
];

/**
 * Tool call, tool response and think regions, from the decoded text of each token: a region runs from
 * the token holding its opening tag to the token holding its closing tag (an unclosed one to the end).
 * The tags may be single added tokens (Qwen) or plain text split over several tokens.
 */
export function findRegions(texts: readonly string[]): Region[] {
  const starts: number[] = [];
  let text = '';
  for (const t of texts) {
    starts.push(text.length);
    text += t;
  }
  // the token holding character c: the last token starting at or before c with non-empty text
  const tokenAt = (c: number): number => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((starts[mid] as number) <= c) lo = mid;
      else hi = mid - 1;
    }
    while (lo > 0 && (texts[lo] as string).length === 0) lo--;
    return lo;
  };
  const open = new Map<RegionKind, number>();
  const regions: Region[] = [];
  const re = /<\/?(?:tool_call|tool_response|think)>/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const tag = TAGS.find(([s]) => s === m?.[0]);
    if (!tag) continue;
    const [, kind, opening] = tag;
    if (opening) {
      if (!open.has(kind)) open.set(kind, tokenAt(m.index));
    } else {
      const start = open.get(kind);
      if (start !== undefined) {
        regions.push({ start, end: tokenAt(m.index + m[0].length - 1) + 1, kind });
        open.delete(kind);
      }
    }
  }
  for (const [kind, start] of open) regions.push({ start, end: texts.length, kind });
  return regions.sort((a, b) => a.start - b.start);
}

/** Call boundaries (each 0->1 transition of the mask is where the next merged call's sampled ids start), divergence, cut and truncation marks. */
export function traceMarkers(trace: Trace): Marker[] {
  const p = trace.prompt_ids.length;
  const markers: Marker[] = [];
  if (trace.diverged_at !== undefined) {
    markers.push({
      at: trace.diverged_at,
      kind: 'diverged',
      label: `diverged${trace.parent !== undefined ? ` from trace ${trace.parent + 1}` : ''} here`,
      title: `the first ${trace.diverged_at} tokens are shared with the parent's prompt + response`,
    });
  }
  let k = 0;
  let prev = 0;
  trace.loss_mask.forEach((m, j) => {
    if (m === 1 && prev === 0) {
      const id = trace.calls[k];
      markers.push({
        at: p + j,
        kind: 'call',
        label: `call ${k + 1}${trace.calls.length ? `/${trace.calls.length}` : ''}`,
        title: id === undefined ? 'sampled tokens (no call id left)' : `call ${id}`,
      });
      k++;
    }
    prev = m;
  });
  const end = p + trace.response_ids.length;
  if (trace.truncated) markers.push({ at: end, kind: 'truncated', label: 'truncated (--max-trace-tokens)' });
  if (trace.cut === 'divergence') {
    markers.push({
      at: end,
      kind: 'cut',
      label: 'chain cut: a later call diverged from it',
    });
  }
  return markers.sort((a, b) => a.at - b.at);
}

export function traceBadges(trace: Trace): string[] {
  const b: string[] = [];
  if (!trace.token_exact) b.push('not token-exact');
  if (trace.truncated) b.push('truncated');
  if (trace.cut) b.push(`cut: ${trace.cut}`);
  if (trace.after_compaction) b.push('after compaction');
  if (trace.spliced_turns) b.push(`spliced turns: ${trace.spliced_turns}`);
  if (trace.parent !== undefined) b.push(`parent: trace ${trace.parent + 1}`);
  if (trace.diverged_at !== undefined) b.push(`diverged at token ${trace.diverged_at}`);
  return b;
}

export function traceView(trace: Trace, index: number, vocab: VocabTable, decoder: TokenDecoder): TraceView {
  const seq = [...trace.prompt_ids, ...trace.response_ids];
  const texts = decodeTokens(decoder, seq);
  const trained = trace.loss_mask.reduce<number>((a, m) => a + m, 0);
  return {
    index,
    kind: trace.kind,
    prompt_len: trace.prompt_ids.length,
    response_len: trace.response_ids.length,
    trained,
    calls: trace.calls.length,
    finish_reason: trace.finish_reason,
    token_exact: trace.token_exact,
    badges: traceBadges(trace),
    markers: traceMarkers(trace),
    regions: findRegions(texts).map((r) => [r.start, r.end, REGION_KINDS.indexOf(r.kind)]),
    ids: encodeVarints(seq.map((id) => vocab.index(id))),
    mask: runLengths(trace.loss_mask),
    lp: quantizeLogprobs(trace),
  };
}

export function trajectoryView(
  record: TrajectoryRecord,
  vocab: VocabTable,
  decoder: TokenDecoder,
): TrajectoryView {
  return {
    id: record.id,
    task_id: record.task_id,
    sample: record.sample,
    group_id: record.group_id,
    harness: record.harness,
    model: record.model,
    status: record.status,
    reward: record.reward,
    advantage: record.v === 1 ? record.advantage : null,
    tokens_trainable: record.stats.tokens_trainable,
    tokens_total: record.stats.tokens_total,
    traces: record.traces.map((t, i) => traceView(t, i, vocab, decoder)),
  };
}

/**
 * Up to `limit` trajectories that show both ends: half from the highest rewards, half from the lowest,
 * in file order. All of them when limit is null or not exceeded.
 */
export function selectTrajectories(records: TrajectoryRecord[], limit: number | null): TrajectoryRecord[] {
  if (limit === null || records.length <= limit) return records;
  const order = records
    .map((r, i) => ({ r: r.reward ?? Number.NEGATIVE_INFINITY, i }))
    .sort((a, b) => b.r - a.r || a.i - b.i);
  const top = Math.ceil(limit / 2);
  const picked = new Set<number>(order.slice(0, top).map((x) => x.i));
  for (let j = order.length - 1; picked.size < limit && j >= 0; j--)
    picked.add((order[j] as { i: number }).i);
  return records.filter((_, i) => picked.has(i));
}

export interface TrajectorySummary {
  trajectories: number;
  traces: number;
  status: Record<string, number>;
  kinds: Record<string, number>;
  reward_mean: number | null;
  reward_min: number | null;
  reward_max: number | null;
  rewarded: number;
  groups: number;
  tokens_trainable: number;
  tokens_total: number;
  token_exact_traces: number;
  /** traces cut to --max-trace-tokens (`truncated: true`) */
  traces_truncated: number;
  /** traces whose chain a later call diverged from (`cut: "divergence"`): they end early, nothing is cut */
  traces_chain_cut: number;
  spliced_turns: number;
}

export function summarize(records: TrajectoryRecord[]): TrajectorySummary {
  const s: TrajectorySummary = {
    trajectories: records.length,
    traces: 0,
    status: {},
    kinds: {},
    reward_mean: null,
    reward_min: null,
    reward_max: null,
    rewarded: 0,
    groups: 0,
    tokens_trainable: 0,
    tokens_total: 0,
    token_exact_traces: 0,
    traces_truncated: 0,
    traces_chain_cut: 0,
    spliced_turns: 0,
  };
  const groups = new Set<string>();
  let sum = 0;
  for (const r of records) {
    s.status[r.status] = (s.status[r.status] ?? 0) + 1;
    if (r.group_id !== null) groups.add(r.group_id);
    if (r.reward !== null) {
      s.rewarded++;
      sum += r.reward;
      s.reward_min = s.reward_min === null ? r.reward : Math.min(s.reward_min, r.reward);
      s.reward_max = s.reward_max === null ? r.reward : Math.max(s.reward_max, r.reward);
    }
    s.tokens_trainable += r.stats.tokens_trainable;
    s.tokens_total += r.stats.tokens_total;
    for (const t of r.traces) {
      s.traces++;
      s.kinds[t.kind] = (s.kinds[t.kind] ?? 0) + 1;
      if (t.token_exact) s.token_exact_traces++;
      if (t.truncated) s.traces_truncated++;
      if (t.cut) s.traces_chain_cut++;
      s.spliced_turns += t.spliced_turns ?? 0;
    }
  }
  s.groups = groups.size;
  if (s.rewarded > 0) s.reward_mean = sum / s.rewarded;
  return s;
}
