/**
 * Prompt preparation for token-in/token-out backends: render the conversation with the model's chat
 * template, then put back the exact token ids polar sampled for every assistant turn it can identify,
 * so each prompt extends the previous prompt plus completion token for token even when the template
 * rewrites history. The algorithm is written out in docs/backends.md ("Splicing").
 */
import type {
  AssistantMessage,
  CanonicalMessage,
  CanonicalRequest,
  ToolCall,
} from '../protocols/canonical.ts';
import type { ChatTokenizer } from './chat-tokenizer.ts';
import { canRenderSuffix, incrementalRenderingWorks, renderSuffix } from './incremental-render.ts';
import { normalizeJson, toTemplateMessages, toTemplateTools } from './messages.ts';

const IM_START = '<|im_start|>';
const IM_END = '<|im_end|>';

/** One assistant turn polar sampled, kept in the session's state for splicing later calls. */
export interface SampledTurn {
  callId: string;
  content: string;
  reasoning: string;
  toolCalls: ToolCall[];
  signature: string;
  /** the ids the splice puts after `<|im_start|>`: the generation prompt's role header, the sampled ids, and `<|im_end|>` when the completion did not end with a stop id */
  turnIds: number[];
  /** the exact prompt ids sent for this call */
  promptIds: number[];
  completionIds: number[];
  /** whether `<|im_end|>` was appended to the sampled ids in turnIds */
  eotAdded: boolean;
}

export class SpliceState {
  readonly turns: SampledTurn[] = [];
  /** renderings of recent calls, most recent last, for incremental rendering of the next call */
  readonly prefixes: RenderedPrefix[] = [];
  private readonly byKey = new Map<string, SampledTurn>();

  add(turn: SampledTurn): void {
    this.turns.push(turn);
    if (turn.signature) this.byKey.set(`sig:${turn.signature}`, turn);
    for (const call of turn.toolCalls) this.byKey.set(`call:${call.id}`, turn);
  }

  byId(kind: 'sig' | 'call', id: string): SampledTurn | undefined {
    return this.byKey.get(`${kind}:${id}`);
  }

  static of(sessionState: Map<string, unknown>, key = 'polar.splice'): SpliceState {
    let state = sessionState.get(key);
    if (!(state instanceof SpliceState)) {
      state = new SpliceState();
      sessionState.set(key, state);
    }
    return state as SpliceState;
  }
}

export interface SpliceRecord {
  /** index of the assistant message in the canonical request */
  turn: number;
  /** ids put in place of the re-rendered turn */
  tokens: number;
  /** how the turn was identified */
  matched_by: 'signature' | 'tool_call_id' | 'content';
  /** the call that sampled it */
  call: string;
  /** tokens the plain re-render of this turn would have had */
  rendered_tokens: number;
}

export interface RenderMismatch {
  turn: number;
  reason: string;
  /** true when polar's sampled ids were spliced in, so the mismatch did not reach the prompt */
  spliced: boolean;
}

export interface PreparedPrompt {
  ids: number[];
  /** the plain template rendering (before splicing) */
  text: string;
  splices: SpliceRecord[];
  mismatches: RenderMismatch[];
  /** ids of the generation prompt after its last `<|im_start|>` (role header and any forced `<think>` block) */
  headerIds: number[];
  /** the prompt ends inside an open `<think>` */
  startsInReasoning: boolean;
  /** the previous call this prompt extends token for token (its prompt + completion is a prefix), if any */
  extendsCall: string | null;
  renderMs: number;
  tokenizeMs: number;
  /** characters that went through BPE this call (the rest came from the piece cache) */
  encodedChars: number;
  /** characters the chat template rendered this call (less than the prompt when a remembered prefix was reused) */
  renderedChars: number;
}

export interface PrepareOptions {
  kwargs: Record<string, unknown>;
  /** turn splicing off (plain re-rendering, the baseline) */
  splice?: boolean;
  /** reuse the previous call's rendering of the unchanged prefix (default true; see incremental-render.ts) */
  incremental?: boolean;
  warnings?: string[];
}

export function templateKwargs(
  request: CanonicalRequest,
  configured: Record<string, unknown> | undefined,
): Record<string, unknown> {
  const kwargs: Record<string, unknown> = {};
  if (request.reasoning?.enabled !== undefined) kwargs.enable_thinking = request.reasoning.enabled;
  return { ...kwargs, ...(configured ?? {}) };
}

interface Block {
  /** offset of `<|im_start|>` */
  start: number;
  /** offset just past this block's `<|im_end|>` (or the next block's start / end of text) */
  end: number;
}

/** Maps each message to the ChatML block it renders into; null when the layout is not ChatML as expected. */
function messageBlocks(messages: CanonicalMessage[], hasTools: boolean): number[] {
  const blocks: number[] = [];
  let next = 0;
  if (hasTools || messages[0]?.role === 'system') next = 1;
  messages.forEach((message, i) => {
    if (i === 0 && message.role === 'system') blocks.push(0);
    else if (message.role === 'tool' && i > 0 && messages[i - 1]!.role === 'tool') blocks.push(next - 1);
    else blocks.push(next++);
  });
  blocks.push(next); // the generation prompt
  return blocks;
}

function findBlocks(text: string): Block[] {
  const starts: number[] = [];
  for (let i = text.indexOf(IM_START); i !== -1; i = text.indexOf(IM_START, i + IM_START.length))
    starts.push(i);
  return starts.map((start, k) => {
    const limit = k + 1 < starts.length ? starts[k + 1]! : text.length;
    const close = text.lastIndexOf(IM_END, limit - 1);
    const end = close >= start ? close + IM_END.length : limit;
    return { start, end: Math.min(end, limit) };
  });
}

/**
 * What a call leaves for the next one of the same conversation: its messages (as JSON, to compare),
 * the rendering and ids up to its generation prompt, and the splice decisions for its assistant turns.
 */
interface RenderedPrefix {
  fingerprints: string[];
  toolsKey: string;
  kwargsKey: string;
  /** the rendered text before the generation prompt's `<|im_start|>` */
  text: string;
  /** the prompt ids; the first `idsLength` are those of `text` */
  ids: number[];
  idsLength: number;
  /** the blocks of `text` */
  blocks: Block[];
  splices: SpliceRecord[];
  mismatches: RenderMismatch[];
  lastSpliced: SampledTurn | null;
  /** sampled turns in the state when the decisions were made */
  turnCount: number;
  /** assistant turns not identified by a minted key: a later sampled turn could change their match */
  unkeyed: number[];
  warnings: string[];
}

const PREFIXES_KEPT = 4;

function prefixes(state: SpliceState): RenderedPrefix[] {
  return state.prefixes;
}

/** the longest remembered prefix this request continues, still valid for the state's turns */
function resumable(
  state: SpliceState,
  request: CanonicalRequest,
  fingerprints: string[],
  toolsKey: string,
  kwargsKey: string,
): RenderedPrefix | null {
  let best: RenderedPrefix | null = null;
  for (const prefix of prefixes(state)) {
    const n = prefix.fingerprints.length;
    if (n > fingerprints.length || (best && best.fingerprints.length >= n)) continue;
    if (prefix.toolsKey !== toolsKey || prefix.kwargsKey !== kwargsKey) continue;
    let same = true;
    for (let i = 0; i < n && same; i++) same = prefix.fingerprints[i] === fingerprints[i];
    if (!same || !canRenderSuffix(request.messages, n)) continue;
    // a turn sampled since then could change how an unkeyed turn of the prefix is matched
    if (prefix.unkeyed.length > 0) {
      if (prefix.turnCount === 0 && state.turns.length > 0) continue;
      const added = state.turns.slice(prefix.turnCount);
      const changed = prefix.unkeyed.some((i) =>
        added.some((t) => turnDifference(request.messages[i] as AssistantMessage, t) === null),
      );
      if (changed) continue;
    }
    best = prefix;
  }
  return best;
}

export function prepareTokenPrompt(
  request: CanonicalRequest,
  tokenizer: ChatTokenizer,
  state: SpliceState,
  options: PrepareOptions,
): PreparedPrompt {
  const warnings = options.warnings ?? [];
  const t0 = performance.now();
  const tools = toTemplateTools(request.tools);
  const imStart = tokenizer.tokenId(IM_START);
  const splicing = options.splice !== false;
  const incremental =
    splicing &&
    options.incremental !== false &&
    imStart !== undefined &&
    tokenizer.exactSplit &&
    incrementalRenderingWorks(tokenizer);
  const fingerprints = incremental ? request.messages.map((m) => JSON.stringify(m)) : [];
  const toolsKey = incremental ? JSON.stringify(tools) : '';
  const kwargsKey = incremental ? JSON.stringify(options.kwargs) : '';

  // render: the whole conversation, or only the messages after a remembered prefix
  let prefix = incremental ? resumable(state, request, fingerprints, toolsKey, kwargsKey) : null;
  let text = '';
  let suffixStart = 0;
  const messageWarnings: string[] = [];
  if (prefix) {
    const suffix = renderSuffix(
      tokenizer,
      toTemplateMessages(request.messages.slice(prefix.fingerprints.length), messageWarnings),
      tools,
      options.kwargs,
      `${toolsKey}\u0000${kwargsKey}`,
    );
    if (suffix === null) {
      prefix = null;
      messageWarnings.length = 0;
    } else {
      messageWarnings.unshift(...prefix.warnings);
      text = prefix.text + suffix;
      suffixStart = prefix.text.length;
    }
  }
  if (!prefix)
    text = tokenizer.render(toTemplateMessages(request.messages, messageWarnings), tools, options.kwargs);
  for (const w of messageWarnings) warnings.push(w);
  const t1 = performance.now();

  const assistantTurns = request.messages
    .map((m, i) => [m, i] as const)
    .filter((e): e is readonly [AssistantMessage, number] => e[0].role === 'assistant');
  const suffixBlocks = imStart === undefined ? [] : findBlocks(prefix ? text.slice(suffixStart) : text);
  const blocks = prefix
    ? prefix.blocks.concat(
        suffixBlocks.map((b) => ({ start: b.start + suffixStart, end: b.end + suffixStart })),
      )
    : suffixBlocks;
  const layout = messageBlocks(request.messages, request.tools.length > 0);
  const firstNew = prefix ? prefix.fingerprints.length : 0;
  const layoutOk =
    imStart !== undefined &&
    blocks.length === layout[layout.length - 1]! + 1 &&
    (blocks[0]?.start === 0 || text.slice(0, blocks[0]?.start ?? 0).trim() === '') &&
    assistantTurns.every(
      ([, i]) => i < firstNew || text.startsWith(`${IM_START}assistant`, blocks[layout[i]!]!.start),
    );
  if (prefix && !layoutOk) {
    // the tail did not come out as the layout needs: start over with the full rendering
    return prepareTokenPrompt(request, tokenizer, state, { ...options, incremental: false });
  }

  let encodedChars = 0;
  const ids: number[] = prefix ? prefix.ids.slice(0, prefix.idsLength) : [];
  const encodeInto = (piece: string) => {
    if (!piece) return;
    const pieceIds = tokenizer.encode(piece);
    encodedChars += tokenizer.lastStats.encodedChars;
    for (let i = 0; i < pieceIds.length; i++) ids.push(pieceIds[i]!);
  };

  const splices: SpliceRecord[] = prefix ? prefix.splices.slice() : [];
  const mismatches: RenderMismatch[] = prefix ? prefix.mismatches.slice() : [];
  const unkeyed = prefix ? prefix.unkeyed.slice() : [];
  let cursor = prefix ? suffixStart : 0;
  let lastSpliced: SampledTurn | null = prefix ? prefix.lastSpliced : null;
  for (const [message, index] of assistantTurns) {
    if (!splicing) break;
    if (index < firstNew) continue;
    if (!layoutOk) {
      if (state.turns.length > 0) {
        mismatches.push({
          turn: index,
          reason: 'the rendered prompt does not have the ChatML layout splicing relies on; rendered as is',
          spliced: false,
        });
      }
      continue;
    }
    const block = blocks[layout[index]!]!;
    const match = findTurn(message, state, ids);
    if (!('turn' in match) || match.by === 'content') unkeyed.push(index);
    if ('reason' in match) {
      mismatches.push({ turn: index, reason: match.reason, spliced: false });
      continue;
    }
    const { turn, by } = match;
    // text up to and including this block's <|im_start|>
    encodeInto(text.slice(cursor, block.start + IM_START.length));
    const renderedBody = text.slice(block.start + IM_START.length, block.end);
    const { reason, renderedTokens } = compareRendering(turn, renderedBody, tokenizer);
    if (reason) mismatches.push({ turn: index, reason, spliced: true });
    const before = ids.length;
    for (const id of turn.turnIds) ids.push(id);
    splices.push({
      turn: index,
      tokens: ids.length - before,
      matched_by: by,
      call: turn.callId,
      rendered_tokens: renderedTokens,
    });
    cursor = block.end;
    lastSpliced = turn;
  }
  encodeInto(text.slice(cursor));
  const t2 = performance.now();

  const lastStart = imStart === undefined ? -1 : ids.lastIndexOf(imStart);
  const headerIds = layoutOk && lastStart !== -1 ? ids.slice(lastStart + 1) : [];
  // the prompt extends the last spliced turn's call when that call's prompt + completion is its prefix
  let extendsCall: string | null = null;
  if (lastSpliced) {
    const full = lastSpliced.promptIds.concat(lastSpliced.completionIds);
    if (lastSpliced.eotAdded) full.push(tokenizer.tokenId(IM_END)!);
    if (startsWith(ids, full)) extendsCall = lastSpliced.callId;
  }
  const lastBlock = blocks.at(-1);
  const open = text.lastIndexOf('<think>');

  // remember this call's rendering for the next call of the conversation
  if (incremental && layoutOk && lastBlock && lastStart !== -1) {
    const kept = prefixes(state);
    const entry: RenderedPrefix = {
      fingerprints,
      toolsKey,
      kwargsKey,
      text: text.slice(0, lastBlock.start),
      ids,
      idsLength: lastStart,
      blocks: blocks.slice(0, -1),
      splices: splices.slice(),
      mismatches: mismatches.slice(),
      lastSpliced,
      turnCount: state.turns.length,
      unkeyed,
      warnings: messageWarnings,
    };
    const at = prefix ? kept.indexOf(prefix) : -1;
    if (at !== -1) kept.splice(at, 1);
    kept.push(entry);
    if (kept.length > PREFIXES_KEPT) kept.shift();
  }
  return {
    ids,
    text,
    splices,
    mismatches,
    headerIds,
    startsInReasoning: open !== -1 && text.indexOf('</think>', open) === -1 && open > (lastBlock?.start ?? 0),
    extendsCall,
    renderMs: t1 - t0,
    tokenizeMs: t2 - t1,
    encodedChars,
    renderedChars: prefix ? text.length - suffixStart : text.length,
  };
}

type Match = { turn: SampledTurn; by: SpliceRecord['matched_by'] } | { reason: string };

function findTurn(message: AssistantMessage, state: SpliceState, idsSoFar: number[]): Match {
  if (state.turns.length === 0)
    return { reason: 'no turn was sampled by polar in this session yet; rendered' };
  const keyed = new Set<SampledTurn>();
  let by: SpliceRecord['matched_by'] = 'content';
  if (message.reasoningSignature) {
    const t = state.byId('sig', message.reasoningSignature);
    if (t) {
      keyed.add(t);
      by = 'signature';
    }
  }
  for (const call of message.toolCalls) {
    const t = state.byId('call', call.id);
    if (t) {
      keyed.add(t);
      if (by === 'content') by = 'tool_call_id';
    }
  }
  if (keyed.size > 1) return { reason: 'its ids belong to different sampled turns; rendered' };
  if (keyed.size === 1) {
    const turn = [...keyed][0]!;
    const diff = turnDifference(message, turn);
    if (diff) return { reason: `carries the ids of turn sampled in ${turn.callId} but ${diff}; rendered` };
    return { turn, by };
  }
  if (!message.content.trim() && message.toolCalls.length === 0) {
    return { reason: 'empty assistant turn without ids; rendered' };
  }
  const candidates = state.turns.filter((t) => turnDifference(message, t) === null);
  if (candidates.length === 0)
    return { reason: 'matches no turn sampled by polar in this session; rendered' };
  const distinct = dedupe(candidates);
  if (distinct.length === 1) return { turn: distinct[0]!, by: 'content' };
  // the same text was sampled more than once with other ids: take the one sampled right after this prefix
  const inPlace = distinct.filter(
    (t) => t.promptIds.length > idsSoFar.length && startsWith(t.promptIds, idsSoFar),
  );
  if (inPlace.length === 1) return { turn: inPlace[0]!, by: 'content' };
  return { reason: `matches ${distinct.length} sampled turns with different ids; ambiguous, rendered` };
}

const comparisons = new WeakMap<
  SampledTurn,
  { sampled: string; body: string; reason: string | null; renderedTokens: number }
>();

/** how the template's rendering of a turn differs from what was sampled (memoised per turn and rendering) */
function compareRendering(
  turn: SampledTurn,
  renderedBody: string,
  tokenizer: ChatTokenizer,
): { reason: string | null; renderedTokens: number } {
  const cached = comparisons.get(turn);
  if (cached && cached.body === renderedBody) return cached;
  const sampled = cached?.sampled ?? tokenizer.decode(turn.turnIds);
  const renderedIds = tokenizer.encode(renderedBody);
  let reason: string | null = null;
  if (renderedBody !== sampled) reason = describeDifference(sampled, renderedBody);
  else if (!sameIds(renderedIds, turn.turnIds)) {
    reason = 're-tokenizing the sampled text gives other ids (token boundaries differ)';
  }
  const result = { sampled, body: renderedBody, reason, renderedTokens: renderedIds.length };
  comparisons.set(turn, result);
  return result;
}

function dedupe(turns: SampledTurn[]): SampledTurn[] {
  const out: SampledTurn[] = [];
  for (const t of turns) if (!out.some((o) => sameIds(o.turnIds, t.turnIds))) out.push(t);
  return out;
}

/** null when the harness's turn says the same as the sampled one; otherwise what differs */
export function turnDifference(message: AssistantMessage, turn: SampledTurn): string | null {
  if (message.content.trim() !== turn.content.trim()) return 'its text differs';
  if (message.reasoning?.trim() && message.reasoning.trim() !== turn.reasoning.trim()) {
    return 'its reasoning differs';
  }
  if (message.toolCalls.length !== turn.toolCalls.length) {
    return `it has ${message.toolCalls.length} tool calls, the sampled turn ${turn.toolCalls.length}`;
  }
  for (let i = 0; i < message.toolCalls.length; i++) {
    const a = message.toolCalls[i]!;
    const b = turn.toolCalls[i]!;
    if (a.name !== b.name) return `tool call ${i} is ${a.name}, sampled ${b.name}`;
    if (normalizeJson(a.arguments) !== normalizeJson(b.arguments))
      return `tool call ${i} has other arguments`;
  }
  return null;
}

function describeDifference(sampled: string, rendered: string): string {
  const sampledThink = /<think>\s*\S[\s\S]*?<\/think>/.test(sampled);
  const renderedThink = /<think>\s*\S[\s\S]*?<\/think>/.test(rendered);
  if (sampledThink && !renderedThink) return "the template dropped the turn's <think> block";
  if (sampled.includes('<tool_call>') && sampled.replace(/\s+/g, '') !== rendered.replace(/\s+/g, '')) {
    return 'the template re-serialised the turn (tool call JSON or text differs)';
  }
  if (sampled.replace(/\s+/g, '') === rendered.replace(/\s+/g, '')) return 'the template changed whitespace';
  return 'the template rendered the turn differently from what was sampled';
}

export function sameIds(a: number[], b: number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function startsWith(ids: number[], prefix: number[]): boolean {
  if (prefix.length > ids.length) return false;
  for (let i = 0; i < prefix.length; i++) if (ids[i] !== prefix[i]) return false;
  return true;
}
