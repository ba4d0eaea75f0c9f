/**
 * Prompt preparation for token-in/token-out backends: render the conversation with the model's chat
 * template, then put back the exact token ids polar sampled for every assistant turn it can identify,
 * so each prompt extends the previous prompt plus completion token for token even when the template
 * rewrites history. The algorithm is written out in docs/backends.md ("Splicing").
 *
 * prepareTokenPrompt runs its steps in order: render (whole, or the tail after a remembered prefix),
 * locate each message's ChatML block, splice the sampled ids of each identified assistant turn while
 * tokenizing the rest, then remember this rendering for the next call. The pieces: splice-layout.ts
 * (blocks), splice-match.ts (which sampled turn a message is), splice-prefix.ts (incremental rendering),
 * splice-state.ts (what a session keeps between calls).
 */
import type { AssistantMessage, CanonicalRequest } from '../protocols/canonical.ts';
import type { ChatTokenizer } from './chat-tokenizer.ts';
import { incrementalRenderingWorks, renderSuffix } from './incremental-render.ts';
import { toTemplateMessages, toTemplateTools } from './messages.ts';
import { type Block, findBlocks, IM_END, IM_START, messageBlocks } from './splice-layout.ts';
import { compareRendering, findTurn, startsWith } from './splice-match.ts';
import { rememberPrefix, resumable } from './splice-prefix.ts';
import type {
  RenderedPrefix,
  RenderMismatch,
  SampledTurn,
  SpliceRecord,
  SpliceState,
} from './splice-state.ts';

export { sameIds, startsWith, turnDifference } from './splice-match.ts';

export {
  type RenderMismatch,
  type SampledTurn,
  type SpliceRecord,
  SpliceState,
} from './splice-state.ts';

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

/** Whether incremental rendering is on for this call, and the keys a remembered prefix must match. */
interface RenderKeys {
  incremental: boolean;
  fingerprints: string[];
  toolsKey: string;
  kwargsKey: string;
}

/** The template's rendering of the conversation; prefix: the remembered one it continues, if any. */
interface Rendering {
  text: string;
  prefix: RenderedPrefix | null;
  /** where the freshly rendered text starts (the remembered prefix's length, else 0) */
  suffixStart: number;
  messageWarnings: string[];
}

/** Each message's ChatML block in the rendering, and whether the layout is what splicing relies on. */
interface Located {
  blocks: Block[];
  /** layout[i]: the block of message i (the last entry: the generation prompt) */
  layout: number[];
  layoutOk: boolean;
  assistantTurns: (readonly [AssistantMessage, number])[];
  /** the first message after the remembered prefix */
  firstNew: number;
}

/** The prompt ids with the sampled turns spliced in, and what was decided for each turn. */
interface Spliced {
  ids: number[];
  splices: SpliceRecord[];
  mismatches: RenderMismatch[];
  unkeyed: number[];
  lastSpliced: SampledTurn | null;
  encodedChars: number;
}

function renderKeys(
  request: CanonicalRequest,
  tokenizer: ChatTokenizer,
  options: PrepareOptions,
  tools: unknown,
  imStart: number | undefined,
): RenderKeys {
  const incremental =
    options.splice !== false &&
    options.incremental !== false &&
    imStart !== undefined &&
    tokenizer.exactSplit &&
    incrementalRenderingWorks(tokenizer);
  return {
    incremental,
    fingerprints: incremental ? request.messages.map((m) => JSON.stringify(m)) : [],
    toolsKey: incremental ? JSON.stringify(tools) : '',
    kwargsKey: incremental ? JSON.stringify(options.kwargs) : '',
  };
}

/** Renders the whole conversation, or only the messages after a remembered prefix. */
function render(
  request: CanonicalRequest,
  tokenizer: ChatTokenizer,
  state: SpliceState,
  options: PrepareOptions,
  tools: ReturnType<typeof toTemplateTools>,
  keys: RenderKeys,
): Rendering {
  const { toolsKey, kwargsKey } = keys;
  const prefix = keys.incremental ? resumable(state, request, keys.fingerprints, toolsKey, kwargsKey) : null;
  const messageWarnings: string[] = [];
  if (prefix) {
    const suffix = renderSuffix(
      tokenizer,
      toTemplateMessages(request.messages.slice(prefix.fingerprints.length), messageWarnings),
      tools,
      options.kwargs,
      `${toolsKey}\u0000${kwargsKey}`,
    );
    if (suffix !== null) {
      messageWarnings.unshift(...prefix.warnings);
      return { text: prefix.text + suffix, prefix, suffixStart: prefix.text.length, messageWarnings };
    }
    messageWarnings.length = 0;
  }
  const text = tokenizer.render(toTemplateMessages(request.messages, messageWarnings), tools, options.kwargs);
  return { text, prefix: null, suffixStart: 0, messageWarnings };
}

/** Finds each message's block in the rendering and checks the layout splicing relies on. */
function locate(request: CanonicalRequest, rendering: Rendering, imStart: number | undefined): Located {
  const { text, prefix, suffixStart } = rendering;
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
  return { blocks, layout, layoutOk, assistantTurns, firstNew };
}

/** Tokenizes the rendering, putting the sampled ids in place of each identified assistant turn. */
function spliceTurns(
  rendering: Rendering,
  located: Located,
  tokenizer: ChatTokenizer,
  state: SpliceState,
  splicing: boolean,
): Spliced {
  const { text, prefix } = rendering;
  const { blocks, layout, layoutOk, firstNew } = located;
  const out: Spliced = {
    ids: prefix ? prefix.ids.slice(0, prefix.idsLength) : [],
    splices: prefix ? prefix.splices.slice() : [],
    mismatches: prefix ? prefix.mismatches.slice() : [],
    unkeyed: prefix ? prefix.unkeyed.slice() : [],
    lastSpliced: prefix ? prefix.lastSpliced : null,
    encodedChars: 0,
  };
  const { ids, mismatches } = out;
  const encodeInto = (piece: string) => {
    if (!piece) return;
    const pieceIds = tokenizer.encode(piece);
    out.encodedChars += tokenizer.lastStats.encodedChars;
    for (let i = 0; i < pieceIds.length; i++) ids.push(pieceIds[i]!);
  };
  let cursor = prefix ? rendering.suffixStart : 0;
  for (const [message, index] of located.assistantTurns) {
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
    if (!('turn' in match) || match.by === 'content') out.unkeyed.push(index);
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
    out.splices.push({
      turn: index,
      tokens: ids.length - before,
      matched_by: by,
      call: turn.callId,
      rendered_tokens: renderedTokens,
    });
    cursor = block.end;
    out.lastSpliced = turn;
  }
  encodeInto(text.slice(cursor));
  return out;
}

/** The call this prompt extends: the last spliced turn's, when its prompt + completion is a prefix. */
function extendedCall(spliced: Spliced, tokenizer: ChatTokenizer): string | null {
  const last = spliced.lastSpliced;
  if (!last) return null;
  const full = last.promptIds.concat(last.completionIds);
  if (last.eotAdded) full.push(tokenizer.tokenId(IM_END)!);
  return startsWith(spliced.ids, full) ? last.callId : null;
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
  const keys = renderKeys(request, tokenizer, options, tools, imStart);
  const rendering = render(request, tokenizer, state, options, tools, keys);
  const { text, prefix, suffixStart } = rendering;
  for (const w of rendering.messageWarnings) warnings.push(w);
  const t1 = performance.now();

  const located = locate(request, rendering, imStart);
  if (prefix && !located.layoutOk) {
    // the tail did not come out as the layout needs: start over with the full rendering
    return prepareTokenPrompt(request, tokenizer, state, { ...options, incremental: false });
  }
  const spliced = spliceTurns(rendering, located, tokenizer, state, options.splice !== false);
  const { ids, splices, mismatches } = spliced;
  const t2 = performance.now();

  const lastStart = imStart === undefined ? -1 : ids.lastIndexOf(imStart);
  const headerIds = located.layoutOk && lastStart !== -1 ? ids.slice(lastStart + 1) : [];
  const lastBlock = located.blocks.at(-1);
  const open = text.lastIndexOf('<think>');

  // remember this call's rendering for the next call of the conversation
  if (keys.incremental && located.layoutOk && lastBlock && lastStart !== -1) {
    const entry: RenderedPrefix = {
      fingerprints: keys.fingerprints,
      toolsKey: keys.toolsKey,
      kwargsKey: keys.kwargsKey,
      text: text.slice(0, lastBlock.start),
      ids,
      idsLength: lastStart,
      blocks: located.blocks.slice(0, -1),
      splices: splices.slice(),
      mismatches: mismatches.slice(),
      lastSpliced: spliced.lastSpliced,
      turnCount: state.turns.length,
      unkeyed: spliced.unkeyed,
      warnings: rendering.messageWarnings,
    };
    rememberPrefix(state, entry, prefix);
  }
  return {
    ids,
    text,
    splices,
    mismatches,
    headerIds,
    startsInReasoning: open !== -1 && text.indexOf('</think>', open) === -1 && open > (lastBlock?.start ?? 0),
    extendsCall: extendedCall(spliced, tokenizer),
    renderMs: t1 - t0,
    tokenizeMs: t2 - t1,
    encodedChars: spliced.encodedChars,
    renderedChars: prefix ? text.length - suffixStart : text.length,
  };
}
