/**
 * Incremental rendering for the splice: what a call leaves for the next call of the same conversation,
 * and which remembered prefix a request continues (see incremental-render.ts, docs/backends.md).
 */
import type { AssistantMessage, CanonicalRequest } from '../protocols/canonical.ts';
import { canRenderSuffix } from './incremental-render.ts';
import { turnDifference } from './splice-match.ts';
import type { RenderedPrefix, SpliceState } from './splice-state.ts';

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
