/**
 * Incremental rendering for the splice: what a call leaves for the next call of the same conversation,
 * and which remembered prefix a request continues (see incremental-render.ts, docs/backends.md).
 */
import type { AssistantMessage, CanonicalRequest } from '../protocols/canonical.ts';
import { canRenderSuffix } from './incremental-render.ts';
import type { RenderMismatch, SampledTurn, SpliceRecord, SpliceState } from './splice.ts';
import type { Block } from './splice-layout.ts';
import { turnDifference } from './splice-match.ts';

/**
 * What a call leaves for the next one of the same conversation: its messages (as JSON, to compare),
 * the rendering and ids up to its generation prompt, and the splice decisions for its assistant turns.
 */
export interface RenderedPrefix {
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

/** the longest remembered prefix this request continues, still valid for the state's turns */
export function resumable(
  state: SpliceState,
  request: CanonicalRequest,
  fingerprints: string[],
  toolsKey: string,
  kwargsKey: string,
): RenderedPrefix | null {
  let best: RenderedPrefix | null = null;
  for (const prefix of state.prefixes) {
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

/** Keeps entry as the newest remembered prefix, in place of the one it was resumed from (if any). */
export function rememberPrefix(
  state: SpliceState,
  entry: RenderedPrefix,
  resumedFrom: RenderedPrefix | null,
): void {
  const kept = state.prefixes;
  const at = resumedFrom ? kept.indexOf(resumedFrom) : -1;
  if (at !== -1) kept.splice(at, 1);
  kept.push(entry);
  if (kept.length > PREFIXES_KEPT) kept.shift();
}
