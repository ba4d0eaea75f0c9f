/**
 * Which sampled turn an assistant message of the conversation is: by the ids polar minted for it (its
 * reasoning signature, its tool call ids), else by content; and how the template's rendering of that
 * turn differs from what was sampled. Part of the splice (splice.ts, docs/backends.md "Splicing").
 */
import type { AssistantMessage } from '../protocols/canonical.ts';
import type { ChatTokenizer } from './chat-tokenizer.ts';
import { normalizeJson } from './messages.ts';
import type { SampledTurn, SpliceRecord, SpliceState } from './splice-state.ts';

export type Match = { turn: SampledTurn; by: SpliceRecord['matched_by'] } | { reason: string };

export function findTurn(message: AssistantMessage, state: SpliceState, idsSoFar: number[]): Match {
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
export function compareRendering(
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
